"""Jitted inverse kinematics on the :class:`~so101_mjx.robot.kinematics.Kinematics` chain.

Pure JAX ports of lerobot_env_so101 0.4.0's ``ik_control`` solvers (Levenberg–Marquardt and
pseudoinverse Gauss–Newton, position-only or with an approach-axis constraint) and of its
top-down grasp helpers. Every function takes any leading batch axes, is jit/vmap/grad-safe and
computes in the dtype of its inputs (float32 or float64); in float64 it reproduces the
reference to round-off.

Convergence freezes each problem separately: an iteration whose error norm is below
``tolerance`` returns ``q`` unchanged, so the next iteration sees the same ``q``, finds the same
error and stays frozen — exactly the reference's ``break``, inside a fixed-length loop. A
problem's result is therefore bitwise independent of the other problems in its batch; across
different batch shapes XLA may round the kinematics differently (measured ≤ 1e-15 rad in float64).

Shapes: ``q`` (..., n) with ``n = kin.nq``; targets (..., 3) world positions in metres; the
task error is (..., 3) for position only, (..., 5) with an approach axis and (..., 6) with a target rotation.

Bad arguments: concrete values (Python, NumPy, concrete JAX arrays) are checked at trace time
and raise ``ValueError`` naming the argument: ``damping``, ``step_size``, ``tolerance`` finite
> 0; ``iterations`` an int >= 1; ``orientation_weight`` finite >= 0; ``approach_axis`` None, 0,
1 or 2; with an approach axis, ``approach_dir`` finite and nonzero (its length does not matter:
the tilt is scale-invariant). Traced values cannot raise: a traced zero ``approach_dir`` has
no tilt to correct (finite joints; its orientation rows only slow the position solve), and a
traced NaN or inf target, direction or target rotation leaves that problem at its seed (finite
joints in, finite joints out); :class:`so101_mjx.ik.solvers.solver.SO101Solver` flags such problems as
failures (``success=False``) and returns the seed.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from jax import Array

from so101_mjx import _checks as checks
from so101_mjx.errors import InputError
from so101_mjx.robot import rotations as R
from so101_mjx.robot.kinematics import Kinematics
from so101_mjx.robot.scenes import ARM_JOINTS, EE_SITE, GRIPPER_JOINT, JAW_PADS

DOWN = (0.0, 0.0, -1.0)
ORIENTATION_WEIGHT = 0.1  # metres of position error traded against one radian of tilt
APPROACH_AXIS = 0  # gripperframe x runs out of the gripper along the jaws
JAW_AXIS = 2  # gripperframe z runs from the fixed toward the moving jaw
ROLL_JOINT = "wrist_roll"
GRASP_JAW_ANGLE = 0.46  # rad: jaw angle at which the pads are parallel, 40 mm apart
TOP_DOWN_JAW_DIRECTION = (0.0, 1.0, 0.0)
_PINV_RCOND = 1e-15  # numpy.linalg.pinv's default cutoff, relative to the largest singular value
_TILT_EPS = 1e-9  # below this sin(tilt) the reference leaves the rotation vector unscaled


def joint_limits(model: mujoco.MjModel, joints: tuple[str, ...] = ARM_JOINTS) -> tuple[np.ndarray, np.ndarray]:
    """Lower and upper joint limits (n,) in radians from ``jnt_range``.

    A joint whose range is empty (lower >= upper) is unbounded (±inf): the reference clips a
    joint only when ``range[0] < range[1]``.
    """
    rng = np.asarray([model.jnt_range[model.joint(j).id] for j in joints], dtype=np.float64)
    bounded = rng[:, 0] < rng[:, 1]
    return np.where(bounded, rng[:, 0], -np.inf), np.where(bounded, rng[:, 1], np.inf)


def _check_task(approach_axis, approach_dir, orientation_weight) -> None:
    """ValueError for a bad concrete task argument (see the module docstring)."""
    if approach_axis is None:
        return
    if approach_axis not in (0, 1, 2) or isinstance(approach_axis, bool):
        raise InputError(f"approach_axis must be None, 0, 1 or 2, got {approach_axis!r}")
    if not checks.is_traced(orientation_weight):
        checks.real("orientation_weight", orientation_weight, ge=0)
    if not checks.is_traced(approach_dir):
        try:
            d = np.asarray(approach_dir, np.float64)
        except (TypeError, ValueError):
            d = np.full(1, np.nan)
        if d.ndim < 1 or d.shape[-1] != 3 or not np.all(np.isfinite(d)) or np.any(np.all(d == 0, -1)):
            raise InputError(f"approach_dir must be a finite nonzero (3,) or (..., 3) direction, got {approach_dir!r}")


def _check_positive(**values) -> None:
    """ValueError unless each concrete value is a finite number > 0 (traced values pass)."""
    for name, value in values.items():
        if not checks.is_traced(value):
            checks.real(name, value, gt=0)


def task_error(
    kin: Kinematics,
    q: Array,
    target: Array,
    *,
    site: str = EE_SITE,
    offset=None,
    approach_axis: int | None = None,
    approach_dir=DOWN,
    orientation_weight: float = ORIENTATION_WEIGHT,
    rotation=None,
    target_rotation=None,
) -> tuple[Array, Array]:
    """Task error and its Jacobian at ``q``, as the reference ``_task_error_and_jacobian``.

    Args:
        kin: the chain; ``q`` (..., n) its joint angles.
        target: (..., 3) world position the controlled point should reach.
        site: the site carrying the controlled frame.
        offset: (3,) or (..., 3) controlled point in the site frame; None = site origin.
        approach_axis: index (0, 1, 2) of the controlled frame's axis to point along
            ``approach_dir``; None = position only.
        approach_dir: (3,) or (..., 3) unit world direction.
        orientation_weight: metres of error per radian of tilt.
        rotation: (3, 3) or (..., 3, 3) controlled frame in the site frame (a TCP rotation);
            None = the site frame itself (the reference).
        target_rotation: (3, 3) or (..., 3, 3) world rotation the controlled frame should take (the
            full orientation, roll included; ``approach_axis`` is then not used); None = not constrained.

    Returns:
        ``(error, jac)``: (..., m) and (..., m, n) with m = 3, 5 with an approach axis (position rows,
        then the tilt's components on the two other axes, times the weight), or 6 with
        ``target_rotation`` (position rows, then the weighted world rotation vector to the target).
    """
    _check_task(approach_axis, approach_dir, orientation_weight)
    dt = q.dtype
    point, axes, jacp, jacr = kin.site_kinematics(q, site, offset)
    error = target - point
    if rotation is not None:
        axes = axes @ jnp.asarray(rotation, dt)
    if target_rotation is not None:
        w = jnp.asarray(orientation_weight, dt)
        rot_err = R.rotation_error(axes, jnp.asarray(target_rotation, dt))
        return jnp.concatenate([error, w * rot_err], -1), jnp.concatenate([jacp, w * jacr], -2)
    if approach_axis is None:
        return error, jacp
    direction = jnp.asarray(approach_dir, dt)
    axis = axes[..., :, approach_axis]
    rot = R.rotvec_between(axis, direction, _TILT_EPS)  # the rotation taking the axis onto the direction
    # Rows on the two other axes: the rotation about the approach axis itself is left free.
    tangent = jnp.swapaxes(axes[..., :, [i for i in range(3) if i != approach_axis]], -1, -2)
    w = jnp.asarray(orientation_weight, dt)
    error = jnp.concatenate([error, w * jnp.einsum("...ij,...j->...i", tangent, rot)], -1)
    jac = jnp.concatenate([jacp, w * (tangent @ jacr)], -2)
    return error, jac


def _spd_solve(a: Array, b: Array) -> Array:
    """Solve ``a x = b`` for symmetric positive-definite ``a`` (..., n, n), ``b`` (..., n).

    An unrolled Cholesky factorization: elementwise over the batch, so it vectorizes and costs a
    fraction of a batched LAPACK call for the 5x5 LM systems.
    """
    n = a.shape[-1]
    low: list[list[Any]] = [[None] * n for _ in range(n)]
    for j in range(n):
        low[j][j] = jnp.sqrt(a[..., j, j] - sum(low[j][k] ** 2 for k in range(j)))
        for i in range(j + 1, n):
            low[i][j] = (a[..., i, j] - sum(low[i][k] * low[j][k] for k in range(j))) / low[j][j]
    y: list[Array] = []
    for i in range(n):
        y.append((b[..., i] - sum(low[i][k] * y[k] for k in range(i))) / low[i][i])
    x: list[Any] = [None] * n
    for i in reversed(range(n)):
        x[i] = (y[i] - sum(low[k][i] * x[k] for k in range(i + 1, n))) / low[i][i]
    return jnp.stack(x, -1)


def _prepare(
    kin: Kinematics, q, target, approach_dir, lower, upper, target_rotation=None
) -> tuple[Array, Array, Array, Array | None, Array, Array, Array]:
    """Cast to one floating dtype, broadcast ``q`` to the problems' batch shape and replace a
    non-finite target, direction or target rotation by a harmless one (zeros; identity).

    Returns ``(q, target, direction, target_rotation, finite (...), lower, upper)``.
    """
    q, target = kin.check_q(q), jnp.asarray(target)
    if target.ndim < 1 or target.shape[-1] != 3:
        raise InputError(f"target must have shape (..., 3), got {target.shape}")
    dt = jnp.result_type(q.dtype, target.dtype)
    direction = jnp.asarray(approach_dir, dt)
    rot = None if target_rotation is None else jnp.asarray(target_rotation, dt)
    if rot is not None and (rot.ndim < 2 or rot.shape[-2:] != (3, 3)):
        raise InputError(f"target_rotation must have shape (3, 3) or (..., 3, 3), got {rot.shape}")
    batch = jnp.broadcast_shapes(q.shape[:-1], target.shape[:-1], direction.shape[:-1],
                                 () if rot is None else rot.shape[:-2])
    finite = jnp.all(jnp.isfinite(target), -1) & jnp.all(jnp.isfinite(direction), -1)
    if rot is not None:
        finite = finite & jnp.all(jnp.isfinite(rot), (-2, -1))
        rot = jnp.where(jnp.isfinite(rot), rot, jnp.eye(3, dtype=dt))
    lo = jnp.asarray(-jnp.inf if lower is None else lower, dt)
    hi = jnp.asarray(jnp.inf if upper is None else upper, dt)
    target, direction = (jnp.where(jnp.isfinite(x), x, 0).astype(dt) for x in (target, direction))
    return (jnp.broadcast_to(q.astype(dt), (*batch, kin.nq)), target, direction, rot, jnp.broadcast_to(finite, batch),
            lo, hi)


def ik_step(
    kin: Kinematics,
    q,
    target,
    *,
    site: str = EE_SITE,
    offset=None,
    approach_axis: int | None = None,
    approach_dir=DOWN,
    orientation_weight: float = ORIENTATION_WEIGHT,
    rotation=None,
    target_rotation=None,
    damping: float = 0.1,
    tolerance: float = 1e-4,
    lower=None,
    upper=None,
) -> Array:
    """One Levenberg–Marquardt iteration: (..., n) joint angles after the update.

    ``dq = solve(JᵀJ + damping·I, Jᵀe)`` (``damping`` > 0 keeps it positive definite), then ``q + dq`` clipped to
    ``[lower, upper]`` (n,) or (..., n) radians (None = unbounded). Returns ``q`` unchanged where ‖e‖ < ``tolerance``,
    and where the target (direction, target rotation) is not finite. Task arguments as in :func:`task_error`.
    """
    _check_positive(damping=damping, tolerance=tolerance)
    _check_task(approach_axis, approach_dir, orientation_weight)
    q, target, direction, rot, finite, lower, upper = _prepare(kin, q, target, approach_dir, lower, upper,
                                                               target_rotation)
    e, jac = task_error(
        kin, q, target, site=site, offset=offset, approach_axis=approach_axis, approach_dir=direction,
        orientation_weight=orientation_weight, rotation=rotation, target_rotation=rot,
    )
    jt = jnp.swapaxes(jac, -1, -2)
    lhs = jt @ jac + jnp.asarray(damping, q.dtype) * jnp.eye(kin.nq, dtype=q.dtype)
    dq = _spd_solve(lhs, jnp.einsum("...ij,...j->...i", jt, e))
    frozen = (jnp.linalg.norm(e, axis=-1) < tolerance) | ~finite
    return jnp.where(frozen[..., None], q, jnp.clip(q + dq, lower, upper))


def levenberg_marquardt(
    kin: Kinematics,
    q0,
    target,
    *,
    site: str = EE_SITE,
    offset=None,
    approach_axis: int | None = None,
    approach_dir=DOWN,
    orientation_weight: float = ORIENTATION_WEIGHT,
    rotation=None,
    target_rotation=None,
    damping: float = 0.1,
    iterations: int = 20,
    tolerance: float = 1e-4,
    lower=None,
    upper=None,
) -> Array:
    """Levenberg–Marquardt IK, the reference ``compute_ik_levenberg_marquardt``.

    ``iterations`` (static) :func:`ik_step` updates from the seed ``q0`` (..., n), each clipped
    to ``[lower, upper]`` (use :func:`joint_limits`; None = unbounded). Returns (..., n) joint
    angles, broadcast over the batch axes of ``q0``, ``target``, ``approach_dir`` and ``target_rotation``.
    A problem whose target (direction, target rotation) has a NaN or inf returns its ``q0``
    unchanged: no step is taken, so its FK residual shows the failure (the solver classes report it
    as ``success=False``).
    """
    iterations = checks.integer("iterations", iterations, ge=1)
    _check_positive(damping=damping, tolerance=tolerance)
    _check_task(approach_axis, approach_dir, orientation_weight)
    q0, target, direction, rot, finite, lower, upper = _prepare(kin, q0, target, approach_dir, lower, upper,
                                                                target_rotation)

    def body(_, q):
        return ik_step(
            kin, q, target, site=site, offset=offset, approach_axis=approach_axis, approach_dir=direction,
            orientation_weight=orientation_weight, rotation=rotation, target_rotation=rot, damping=damping,
            tolerance=tolerance, lower=lower, upper=upper,
        )

    # The non-finite problems were made finite above (ik_step sees harmless ones): restore their seeds.
    return jnp.where(finite[..., None], jax.lax.fori_loop(0, iterations, body, q0), q0)


def pseudoinverse(
    kin: Kinematics,
    q0,
    target,
    *,
    site: str = EE_SITE,
    offset=None,
    approach_axis: int | None = None,
    approach_dir=DOWN,
    orientation_weight: float = ORIENTATION_WEIGHT,
    rotation=None,
    target_rotation=None,
    step_size: float = 1.0,
    iterations: int = 20,
    tolerance: float = 1e-4,
) -> Array:
    """Gauss–Newton IK with the Moore–Penrose pseudoinverse, the reference ``compute_ik_pseudoinverse``.

    ``q += step_size · pinv(J) e`` (numpy's cutoff: singular values ≤ 1e-15·σ_max dropped), no
    joint clipping, same per-problem freeze as :func:`levenberg_marquardt`. The reference
    supports position only; the approach-axis and target-rotation rows are available here too.
    Returns (..., n); a problem with a NaN or inf target (direction, rotation) returns its ``q0``.
    """
    iterations = checks.integer("iterations", iterations, ge=1)
    _check_positive(step_size=step_size, tolerance=tolerance)
    _check_task(approach_axis, approach_dir, orientation_weight)
    q0, target, direction, rot, finite, _, _ = _prepare(kin, q0, target, approach_dir, None, None, target_rotation)

    def body(_, q):
        e, jac = task_error(
            kin, q, target, site=site, offset=offset, approach_axis=approach_axis, approach_dir=direction,
            orientation_weight=orientation_weight, rotation=rotation, target_rotation=rot,
        )
        dq = jnp.einsum("...ij,...j->...i", jnp.linalg.pinv(jac, rtol=_PINV_RCOND), e)
        frozen = (jnp.linalg.norm(e, axis=-1) < tolerance) | ~finite
        return jnp.where(frozen[..., None], q, q + step_size * dq)

    return jax.lax.fori_loop(0, iterations, body, q0)


def grasp_point_offset(model: mujoco.MjModel, site: str = EE_SITE, jaw_angle: float = GRASP_JAW_ANGLE) -> np.ndarray:
    """Midpoint of the two jaw pads at ``jaw_angle`` rad, in the ``site`` frame, (3,) metres.

    The top-down controlled point (MuJoCo C, as the reference ``grasp_point_offset``).
    """
    data = mujoco.MjData(model)
    data.qpos[model.joint(GRIPPER_JOINT).qposadr[0]] = jaw_angle
    mujoco.mj_forward(model, data)
    s = model.site(site).id
    midpoint = np.mean([data.geom_xpos[model.geom(name).id] for name in JAW_PADS], axis=0)
    return data.site_xmat[s].reshape(3, 3).T @ (midpoint - data.site_xpos[s])


def top_down_seed(
    kin: Kinematics,
    q,
    lower,
    upper,
    *,
    frames_q=None,
    site: str = EE_SITE,
    roll_joint: str = ROLL_JOINT,
    jaw_axis: int = JAW_AXIS,
    direction=TOP_DOWN_JAW_DIRECTION,
) -> Array:
    """``q`` (..., n) with ``roll_joint`` turned so site axis ``jaw_axis`` points toward ``direction``.

    Both vectors are projected onto the plane normal to the roll joint's world axis; the new
    roll angle is clipped to ``[lower, upper]`` ((n,) radians) at the roll joint, as the
    reference ``roll_to_align_axis`` + ``_top_down_seed``. The frames are evaluated at
    ``frames_q`` (default ``q``): the reference measures the roll on the kinematics MuJoCo last
    computed (one physics step old after ``mj_step``) and adds it to the current angles.
    """
    q = kin.check_q(q)
    dt = q.dtype
    fq = q if frames_q is None else kin.check_q(frames_q)
    r = kin.joints.index(roll_joint)
    hinge = kin.joint_frames(fq)[0][..., r, :]
    current = kin.site_pose(fq, site)[1][..., :, jaw_axis]
    wanted = jnp.asarray(direction, dt)
    current = current - jnp.sum(current * hinge, -1, keepdims=True) * hinge
    wanted = wanted - jnp.sum(wanted * hinge, -1, keepdims=True) * hinge
    angle = R.signed_angle(current, wanted, hinge)
    roll = jnp.clip(q[..., r] + angle, jnp.asarray(lower, dt)[..., r], jnp.asarray(upper, dt)[..., r])
    return q.at[..., r].set(roll)
