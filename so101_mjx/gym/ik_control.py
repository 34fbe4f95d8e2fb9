"""``solve_ik``: the reference's IK dispatcher (lerobot_env_so101 0.4.0 ``ik_control.solve_ik``).

The same arguments and defaults on a MuJoCo model and data; the iterations are
:mod:`so101_mjx.ik.iterative`'s JAX ports of the reference's solvers (float64 with
``jax_enable_x64``, where they reproduce it to round-off; float32 otherwise).
"""

from __future__ import annotations

import dataclasses

import mujoco
import numpy as np

from so101_mjx import _checks as checks
from so101_mjx.errors import InputError
from so101_mjx.ik import iterative as ik
from so101_mjx.robot.kinematics import Kinematics

IK_METHODS = ("levenberg_marquardt", "pseudoinverse")
IK_TOLERANCE = 1e-4  # m: the reference's convergence threshold on the task error


def chain_at(model: mujoco.MjModel, data: mujoco.MjData, joints: tuple[str, ...]) -> Kinematics:
    """The chain of ``joints`` (below the root body of the first one), with its other hinges
    (the gripper's) at their current ``data.qpos`` instead of ``qpos0``."""
    root = model.body(model.body_rootid[model.joint(joints[0]).bodyid[0]]).name
    kin = Kinematics.from_model(model, joints, root)
    held = kin.joint_qpos0.copy()
    for i, (body, j) in enumerate(zip(kin.body_names, kin.body_joint)):
        if j == -2:
            held[i] = data.qpos[model.jnt_qposadr[model.body(body).jntadr[0]]]
    return dataclasses.replace(kin, joint_qpos0=held)


def solve_ik(
    model: mujoco.MjModel,
    data: mujoco.MjData,
    site_id: int,
    dof_ids: np.ndarray,
    target_pos: np.ndarray,
    ik_method: str = "levenberg_marquardt",
    ik_damping: float = 0.1,
    ik_iterations: int = 20,
    seed_q: np.ndarray | None = None,
    point_offset: np.ndarray | None = None,
    approach_axis: int | None = None,
    approach_dir: np.ndarray | tuple[float, float, float] = ik.DOWN,
    orientation_weight: float = ik.ORIENTATION_WEIGHT,
) -> np.ndarray:
    """Joint angles (len(dof_ids),) rad placing site ``site_id`` (or the point ``point_offset`` (3,)
    in its frame) at ``target_pos`` (3,) world metres: the command for position actuators.

    ``ik_method``: ``"levenberg_marquardt"`` (``ik_damping``, joint limits clipped; with
    ``approach_axis`` 0/1/2 that site axis also points along ``approach_dir``, traded at
    ``orientation_weight`` metres per radian) or ``"pseudoinverse"`` (position of the site only).
    ``ik_iterations`` at most, from ``seed_q`` (default: the current ``data.qpos[dof_ids]``).
    ``data`` is left as it was (``mj_forward`` run on it, as the reference). ValueError for an
    unknown method, for ``point_offset`` / ``approach_axis`` with the pseudoinverse, and for bad ids
    or shapes.
    """
    if ik_method not in IK_METHODS:
        raise InputError(f"Unknown IK method: {ik_method!r}; expected one of {IK_METHODS}")
    if ik_method == "pseudoinverse" and (point_offset is not None or approach_axis is not None):
        raise InputError("point_offset and approach_axis require ik_method='levenberg_marquardt'")
    dofs = checks.real_array("dof_ids", dof_ids).astype(np.int64).reshape(-1)
    if (dofs.size == 0 or np.any((dofs < 0) | (dofs >= model.nv))
            or not np.array_equal(dofs, np.asarray(dof_ids).reshape(-1))):
        raise InputError(f"dof_ids must be integer ids of the model's dofs (0..{model.nv - 1}), got {dof_ids!r}")
    site_id = checks.integer("site_id", site_id, ge=0, le=model.nsite - 1)
    target = checks.real_array("target_pos", target_pos, (3,), finite=True)
    current_q = data.qpos[dofs].copy()
    q0 = current_q if seed_q is None else checks.real_array("seed_q", seed_q, (dofs.size,), finite=True)
    joints = tuple(model.joint(model.dof_jntid[d]).name for d in dofs)
    kin = chain_at(model, data, joints)
    site = model.site(site_id).name
    if site not in kin.site_names:
        raise InputError(f"site {site!r} is not on the chain of the joints {joints}")
    if ik_method == "pseudoinverse":
        q = ik.pseudoinverse(kin, q0, target, site=site, iterations=ik_iterations, tolerance=IK_TOLERANCE)
    else:
        lower, upper = ik.joint_limits(model, joints)
        q = ik.levenberg_marquardt(
            kin, q0, target, site=site, offset=point_offset, approach_axis=approach_axis, approach_dir=approach_dir,
            orientation_weight=orientation_weight, damping=ik_damping, iterations=ik_iterations, tolerance=IK_TOLERANCE,
            lower=lower, upper=upper,
        )
    data.qpos[dofs] = current_q
    mujoco.mj_forward(model, data)
    return np.asarray(q, np.float64)
