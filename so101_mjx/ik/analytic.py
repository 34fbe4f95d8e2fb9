"""Closed-form IK of the SO-101: every branch of (TCP position, approach pitch, wrist roll).

The arm is a pan joint about the vertical, three pitch joints about parallel horizontal axes
(shoulder_lift, elbow_flex, wrist_flex) and a wrist roll about an axis perpendicular to them, the
site's approach axis (x) running along the roll axis. With the product of exponentials at the
zero configuration, ``tool(q) = e1(θ1) e2(θ2) e3(θ3) e4(θ4) e5(θ5) p0``:

1. the roll is given, so ``p5 = e5(θ5) p0`` is known;
2. the pitch rotations keep the coordinate of ``p5`` along the pitch axis, ``h``; the pan turns
   ``(X, h)`` onto the target's horizontal position: ``X = ±√(r² − h²)`` — the two *pan*
   branches (reaching forward, or back over the pan axis);
3. the approach pitch fixes the sum ``s = θ2 + θ3 + θ4``, so the wrist point is known and the
   shoulder and elbow solve a planar two-link problem — the two *elbow* branches;
4. ``θ4 = s − θ2 − θ3``.

Four candidates per target, each flagged valid when it exists (reach), is within the joint
limits and its FK reproduces the target (position error < ``pos_eps``). Honoured exactly: the
TCP position, the approach axis's pitch (angle below the horizontal) and the wrist roll; the
approach axis's azimuth is not free on a 5-DoF arm — it follows the pan.

The pitch is the in-plane angle of the approach axis below the arm's forward horizontal
(:func:`pitch_of` of joint angles; :func:`approach_direction` its world direction at a pan).

Shapes: targets (..., 3) metres, pitch and roll (...) radians; candidates (..., 4, 5) radians in
``ARM_JOINTS`` order, validity (..., 4). Pure JAX, any batch axes, float32 or float64.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax.numpy as jnp
import numpy as np
from jax import Array

from so101_mjx.errors import InputError
from so101_mjx.robot import rotations as R
from so101_mjx.robot.kinematics import Kinematics

BRANCHES = ((1, 1), (1, -1), (-1, 1), (-1, -1))  # (pan: forward / back, elbow sign)
_STRUCTURE_TOL = 1e-9


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


def _check(condition: bool | np.bool_, what: str) -> None:
    if not condition:
        raise InputError(f"the chain is not SO-101-shaped for closed-form IK: {what}")


@dataclass(frozen=True, eq=False)
class ArmGeometry:
    """The chain at its reference configuration, in a frame ``(ex, ey, ez)`` on the pan axis.

    ``ez`` is vertical (up), ``ey`` the pitch axis direction, ``ex = ey × ez``; coordinates are
    relative to ``origin``, a point of the pan axis. Built by :meth:`from_kinematics`.
    """

    origin: np.ndarray  # (3,) world
    frame: np.ndarray  # (3, 3) rows ex, ey, ez in world coordinates
    pan_sign: float  # +1 if the pan axis points along ez
    anchors: np.ndarray  # (3, 3) shoulder, elbow, wrist pitch anchors (frame coordinates)
    roll_anchor: np.ndarray  # (3,)
    roll_axis: np.ndarray  # (3,) unit, frame coordinates
    tool: np.ndarray  # (3,) TCP point at the reference configuration
    approach_angle: float  # polar angle of the approach axis in the (x, z) plane at the reference
    qpos0: np.ndarray  # (5,) reference joint angles

    @classmethod
    def from_kinematics(cls, kin: Kinematics, site: str, offset=None) -> ArmGeometry:
        """Geometry of ``kin`` (the 5 arm joints) for the point ``offset`` (3,) in the ``site`` frame;
        ValueError when the chain does not have the SO-101's structure."""
        _check(kin.nq == 5, f"needs 5 joints, got {kin.joints}")
        q0 = np.array([kin.joint_qpos0[kin.body_joint.index(j)] for j in range(5)])
        axes, anchors = (np.asarray(x, np.float64) for x in kin.joint_frames(q0)[:2])
        pos, rot = (np.asarray(x, np.float64) for x in kin.site_pose(q0, site))
        tool = pos + rot @ (np.zeros(3) if offset is None else np.asarray(offset, np.float64))
        up = np.array([0.0, 0.0, 1.0])
        _check(abs(abs(axes[0] @ up) - 1) < _STRUCTURE_TOL, "the pan axis is not vertical")
        for j in (2, 3):
            _check(np.linalg.norm(np.cross(axes[1], axes[j])) < _STRUCTURE_TOL and axes[1] @ axes[j] > 0,
                   "the pitch axes are not parallel")
        _check(abs(axes[1] @ up) < _STRUCTURE_TOL, "the pitch axes are not horizontal")
        _check(abs(axes[4] @ axes[1]) < _STRUCTURE_TOL, "the roll axis is not perpendicular to the pitch axes")
        _check(np.linalg.norm(np.cross(rot[:, 0], axes[4])) < _STRUCTURE_TOL,
               "the site x axis is not along the roll axis")
        ey = _unit(axes[1])
        frame = np.stack([np.cross(ey, up), ey, up])
        origin = anchors[0] - (anchors[0] @ up) * up  # the pan axis at height 0
        local = lambda p: frame @ (p - origin)  # noqa: E731
        approach = frame @ rot[:, 0]
        return cls(
            origin=origin, frame=frame, pan_sign=float(np.sign(axes[0] @ up)),
            anchors=np.stack([local(anchors[j]) for j in (1, 2, 3)]), roll_anchor=local(anchors[4]),
            roll_axis=frame @ axes[4], tool=local(tool), approach_angle=float(np.arctan2(approach[2], approach[0])),
            qpos0=q0,
        )


def _pitch(angle: Array, x: Array, z: Array) -> tuple[Array, Array]:
    """Rotation by ``angle`` about +y of the (x, z) components (right-handed)."""
    c, s = jnp.cos(angle), jnp.sin(angle)
    return x * c + z * s, -x * s + z * c


def wrap(angle: Array) -> Array:
    """``angle`` wrapped to (-π, π] by whole turns (no trigonometric calls; exact where already in range)."""
    return angle - 2 * jnp.pi * jnp.ceil((angle - jnp.pi) / (2 * jnp.pi))


def solve(geom: ArmGeometry, target: Array, pitch: Array, roll: Array) -> tuple[Array, Array]:
    """All branches for a world TCP ``target`` (..., 3), approach ``pitch`` (...) (:func:`pitch_of`;
    π/2: pointing down) and wrist ``roll`` (...) joint angle, radians.

    Returns ``(exists (..., 4), q (..., 4, 5))`` in :data:`BRANCHES` order: ``exists`` says the
    branch reaches the target (joint limits and the FK check are :class:`SO101AnalyticSolver`'s);
    a branch that does not exist holds finite angles. Ten inverse trigonometric calls per target:
    the two pan branches share the target's azimuth (the back pan is the forward one's mirror),
    and each elbow pair shares one arccos, the elbow's cosine and sine then following by algebra.
    """
    return _stack([b for pan_sign in (1, -1) for b in _pan_branches(geom, target, pitch, roll, pan_sign, (1, -1))])


def solve_each(geom: ArmGeometry, target: Array, pitch: Array, roll: Array) -> tuple[Array, Array]:
    """As :func:`solve`, but branch ``k`` at its own wrist roll ``roll[..., k]`` ((..., 4) radians)."""
    return _stack([_pan_branches(geom, target, pitch, roll[..., k], pan_sign, (elbow_sign,))[0]
                   for k, (pan_sign, elbow_sign) in enumerate(BRANCHES)])


def _stack(branches: list[tuple[Array, Array]]) -> tuple[Array, Array]:
    return jnp.stack([e for e, _ in branches], -1), jnp.stack([q for _, q in branches], -2)


def _pan_branches(geom: ArmGeometry, target: Array, pitch: Array, roll: Array, pan_sign: int,
                  elbow_signs: tuple[int, ...]) -> list[tuple[Array, Array]]:
    """``(exists (...), q (..., 5))`` of the branches (``pan_sign``, each of ``elbow_signs``)."""
    dt = target.dtype
    c = lambda x: jnp.asarray(x, dt)  # noqa: E731
    t = jnp.einsum("ij,...j->...i", c(geom.frame), target - c(geom.origin))
    roll_angle = roll - float(geom.qpos0[4])
    p5 = c(geom.roll_anchor) + R.rotate_about(
        geom.roll_axis, roll_angle,
        jnp.broadcast_to(c(geom.tool - geom.roll_anchor), jnp.broadcast_shapes(t.shape, (*roll_angle.shape, 3))))
    h = p5[..., 1]
    r2 = t[..., 0] ** 2 + t[..., 1] ** 2
    reach_x = jnp.sqrt(jnp.maximum(r2 - h**2, 0))
    azimuth, offset = jnp.arctan2(t[..., 1], t[..., 0]), jnp.arctan2(h, reach_x)
    # atan2(h, -X) = π - atan2(h, X) modulo 2π.
    pan = azimuth - offset if pan_sign > 0 else azimuth + offset - jnp.pi
    (c2x, _, c2z), c3, (c4x, _, c4z) = (tuple(float(a) for a in p) for p in geom.anchors)
    (u0, u1), (v0, v1) = (c3[0] - c2x, c3[2] - c2z), (c4x - c3[0], c4z - c3[2])  # upper, lower arm in (x, z)
    l1, l2 = float(np.hypot(u0, u1)), float(np.hypot(v0, v1))
    bend = float(np.arctan2(v1, v0) - np.arctan2(u1, u0))  # upper-to-lower arm angle at θ3 = 0
    cb, sb = float(np.cos(bend)), float(np.sin(bend))
    s = float(geom.approach_angle) + pitch  # θ2 + θ3 + θ4 (angles relative to qpos0)
    wx, wz = _pitch(s, p5[..., 0] - c4x, p5[..., 2] - c4z)  # wrist-to-tool after the pitches
    wx_rel, wz_rel = pan_sign * reach_x - wx - c2x, t[..., 2] - wz - c2z
    cos_elbow = (wx_rel**2 + wz_rel**2 - l1**2 - l2**2) / (2 * l1 * l2)
    reach = (r2 >= h**2) & (jnp.abs(cos_elbow) <= 1)
    cos_g = jnp.clip(cos_elbow, -1, 1)
    gamma, sin_g = jnp.arccos(cos_g), jnp.sqrt(1 - cos_g**2)
    wrist = jnp.arctan2(wz_rel, wx_rel)
    branches = []
    for elbow_sign in elbow_signs:
        # θ3 = bend − γ: its cosine and sine from cos γ, ±sin γ.
        cos3, sin3 = cb * cos_g + sb * elbow_sign * sin_g, sb * cos_g - cb * elbow_sign * sin_g
        th3 = bend - elbow_sign * gamma
        ex, ez = v0 * cos3 + v1 * sin3, v1 * cos3 - v0 * sin3
        th2 = jnp.arctan2(u1 + ez, u0 + ex) - wrist
        angles = jnp.broadcast_arrays(geom.pan_sign * pan, th2, th3, s - th2 - th3, roll_angle)
        branches.append((reach, wrap(jnp.stack(angles, -1)) + c(geom.qpos0)))
    return branches


def pitch_of(geom: ArmGeometry, q: Array) -> Array:
    """The approach pitch (...) that :func:`solve` takes, of joint angles ``q`` (..., 5): radians in (-π, π]
    (the in-plane angle of the approach axis below the arm's forward horizontal)."""
    q = jnp.asarray(q)
    return wrap(jnp.sum(q[..., 1:4] - jnp.asarray(geom.qpos0[1:4], q.dtype), -1) - float(geom.approach_angle))


def approach_direction(geom: ArmGeometry, pan: Array, pitch: Array) -> Array:
    """World unit approach axis (..., 3) of an arm at ``pan`` joint angle (...) with approach ``pitch`` (...)."""
    azimuth = geom.pan_sign * (pan - float(geom.qpos0[0]))
    azimuth, pitch = jnp.broadcast_arrays(azimuth, pitch)
    c = jnp.cos(pitch)
    local = jnp.stack([c * jnp.cos(azimuth), c * jnp.sin(azimuth), -jnp.sin(pitch)], -1)
    return jnp.einsum("ji,...j->...i", jnp.asarray(geom.frame, local.dtype), local)


def forward(geom: ArmGeometry, q: Array) -> Array:
    """World TCP position (..., 3) of joint angles ``q`` (..., 5): the product of exponentials of the
    geometry (roll, the three pitches, then the pan), equal to the chain's FK to round-off."""
    q = jnp.asarray(q)
    dt = q.dtype
    rel = q - jnp.asarray(geom.qpos0, dt)
    tool = jnp.broadcast_to(jnp.asarray(geom.tool - geom.roll_anchor, dt), (*q.shape[:-1], 3))
    x, y, z = jnp.moveaxis(jnp.asarray(geom.roll_anchor, dt) + R.rotate_about(geom.roll_axis, rel[..., 4], tool), -1, 0)
    for j, (ax, _, az) in zip((3, 2, 1), geom.anchors[::-1]):  # wrist, elbow, shoulder pitch
        dx, dz = _pitch(rel[..., j], x - float(ax), z - float(az))
        x, z = dx + float(ax), dz + float(az)
    pan = geom.pan_sign * rel[..., 0]
    c, s = jnp.cos(pan), jnp.sin(pan)
    local = jnp.stack([x * c - y * s, x * s + y * c, z], -1)
    return jnp.asarray(geom.origin, dt) + jnp.einsum("ji,...j->...i", jnp.asarray(geom.frame, dt), local)
