"""Rigid-body algorithms of a hinge chain in JAX: the kernels behind :class:`so101_mjx.dynamics.backend.JaxBackend`.

Pure functions of one configuration (batch them with ``jnp.vectorize`` / ``vmap``), in float32 or
float64 (the dtype of ``q``). Spatial vectors are ``[angular; linear]``, world-aligned, with the
linear part taken at the world origin. Inertial parameters θ are Pinocchio's dynamic parameters
per moving body, ``[m, m cx, m cy, m cz, Ixx, Ixy, Iyy, Ixz, Iyz, Izz]``, body frame, inertia about
the body origin. Conventions are stated in :mod:`so101_mjx.dynamics.backend`.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax.numpy as jnp
import mujoco
import numpy as np
from jax import Array

from so101_mjx.errors import InputError
from so101_mjx.robot import rotations as R
from so101_mjx.robot.kinematics import Kinematics
from so101_mjx.robot.scenes import ROBOT_JOINTS


def body_parameters(model: mujoco.MjModel, body: int) -> np.ndarray:
    """Pinocchio dynamic parameters (10,) of a MuJoCo body: inertia about the body origin."""
    m, c = model.body_mass[body], model.body_ipos[body]
    rot = R.quat_to_mat_np(model.body_iquat[body])
    inertia = rot @ np.diag(model.body_inertia[body]) @ rot.T + m * (c @ c * np.eye(3) - np.outer(c, c))
    return np.array([m, *(m * c), inertia[0, 0], inertia[0, 1], inertia[1, 1], inertia[0, 2], inertia[1, 2],
                     inertia[2, 2]])



def _hinges(model: mujoco.MjModel) -> list[str]:
    return [model.joint(j).name for j in range(model.njnt) if model.jnt_type[j] == mujoco.mjtJoint.mjJNT_HINGE]


def chain_joints(model: mujoco.MjModel, joints: tuple[str, ...] | None) -> tuple[str, ...]:
    """``joints`` checked as hinge joints of ``model``; None = ``ROBOT_JOINTS`` if the model has them,
    else all its hinges. InputError naming the joint and listing the model's hinges otherwise."""
    hinges = _hinges(model)
    if joints is None:
        joints = ROBOT_JOINTS if set(ROBOT_JOINTS) <= set(hinges) else tuple(hinges)
    if isinstance(joints, str) or not all(isinstance(j, str) for j in joints) or not joints:
        raise InputError(f"joints must be a non-empty sequence of hinge joint names, got {joints!r}")
    for name in joints:
        if name not in hinges:
            raise InputError(f"joints: {name!r} is not a hinge joint of the model; its hinges: {hinges}")
    return tuple(joints)


def chain_root(model: mujoco.MjModel, joints: tuple[str, ...]) -> str:
    """The chain's root body: ``base`` when every joint's body is below it, else the body just
    below the world on the first joint's branch."""
    bodies = [model.jnt_bodyid[model.joint(j).id] for j in joints]

    def ancestors(b: int) -> list[int]:
        out = [b]
        while b > 0:
            b = model.body_parentid[b]
            out.append(b)
        return out

    base = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, "base")
    if base > 0 and all(base in ancestors(b) for b in bodies):
        return "base"
    return model.body(ancestors(bodies[0])[-2]).name

@dataclass(frozen=True, eq=False)
class Chain:
    """Static data of the dynamic chain: the kinematics plus, per moving body, its parameters.

    ``moving`` indexes ``kin.body_names``; ``support[i, j]`` is 1 when joint ``j`` moves moving
    body ``i``; ``joint_body[j]`` is the moving-body index that joint ``j`` rotates.
    """

    kin: Kinematics
    moving: np.ndarray  # (nb,) indices into kin.body_names
    support: np.ndarray  # (nb, nv)
    joint_body: np.ndarray  # (nv,)
    params: np.ndarray  # (nb, 10)
    armature: np.ndarray  # (nv,)
    gravity: np.ndarray  # (3,)
    q_range: np.ndarray  # (nv, 2)

    @classmethod
    def from_model(cls, model: mujoco.MjModel, joints: tuple[str, ...] = ROBOT_JOINTS) -> Chain:
        """The chain of hinge ``joints`` below :func:`chain_root`; InputError naming a joint the model lacks."""
        joints = chain_joints(model, joints)
        kin = Kinematics.from_model(model, joints, chain_root(model, joints))
        nbody = len(kin.body_names)
        support = np.zeros((nbody, len(joints)))
        for i in range(nbody):
            b = i
            while b >= 0:
                if kin.body_joint[b] >= 0:
                    support[i, kin.body_joint[b]] = 1.0
                b = kin.body_parent[b]
        moving = np.flatnonzero(support.any(axis=1))
        joint_body = np.array([moving.tolist().index(kin.body_joint.index(j)) for j in range(len(joints))])
        ids = [model.joint(n).id for n in joints]
        return cls(
            kin=kin,
            moving=moving,
            support=support[moving],
            joint_body=joint_body,
            params=np.array([body_parameters(model, model.body(kin.body_names[b]).id) for b in moving]),
            armature=model.dof_armature[model.jnt_dofadr[ids]].copy(),
            gravity=model.opt.gravity.copy(),
            q_range=model.jnt_range[ids].copy(),
        )

    @property
    def frame_names(self) -> tuple[str, ...]:
        return self.kin.body_names + self.kin.site_names

    @property
    def frame_support(self) -> np.ndarray:
        """(nf, nv): 1 where joint j moves frame f (bodies of ``kin``, then sites)."""
        rows = {b: row for b, row in zip(self.moving, self.support)}
        bodies = [*range(len(self.kin.body_names)), *self.kin.site_body]
        return np.array([rows.get(b, np.zeros(self.support.shape[1])) for b in bodies])

    @property
    def body_names(self) -> tuple[str, ...]:
        """Names of the moving bodies, in parameter order."""
        return tuple(self.kin.body_names[b] for b in self.moving)


def _motion_cross(v: Array, x: Array) -> Array:
    """Spatial motion cross product ``v × x``, (..., 6)."""
    w, u, xw, xu = v[..., :3], v[..., 3:], x[..., :3], x[..., 3:]
    return jnp.concatenate([jnp.cross(w, xw), jnp.cross(w, xu) + jnp.cross(u, xw)], -1)


def _force_cross(v: Array, f: Array) -> Array:
    """Spatial force cross product ``v ×* f``, (..., 6)."""
    w, u, n, fl = v[..., :3], v[..., 3:], f[..., :3], f[..., 3:]
    return jnp.concatenate([jnp.cross(w, n) + jnp.cross(u, fl), jnp.cross(w, fl)], -1)


def _world_inertia(theta: Array, pos: Array, rot: Array) -> tuple[Array, Array, Array]:
    """Mass (nb,), first moment (nb, 3) and rotational inertia (nb, 3, 3) about the world origin."""
    m = theta[:, 0]
    h = jnp.einsum("bij,bj->bi", rot, theta[:, 1:4])
    i = theta[:, jnp.array([4, 5, 7, 5, 6, 8, 7, 8, 9])].reshape(-1, 3, 3)
    sp, sh = R.skew(pos), R.skew(h)
    inertia = rot @ i @ jnp.swapaxes(rot, -1, -2) - m[:, None, None] * sp @ sp - sp @ sh - sh @ sp
    return m, h + m[:, None] * pos, inertia


def _apply_inertia(m: Array, h: Array, inertia: Array, x: Array) -> Array:
    """Spatial inertia times motion ``x``; all arguments broadcast over leading axes."""
    w, u = x[..., :3], x[..., 3:]
    n = jnp.einsum("...ij,...j->...i", inertia, w) + jnp.cross(h, u)
    return jnp.concatenate([n, m[..., None] * u - jnp.cross(h, w)], -1)


def poses(chain: Chain, q: Array) -> tuple[Array, Array, Array]:
    """World positions (nb_all, 3), rotations (nb_all, 3, 3) and joint screws (nv, 6)."""
    kin = chain.kin
    xpos, xrot = kin.forward(q)
    bodies = [kin.body_joint.index(j) for j in range(kin.nq)]
    rot = xrot[jnp.array(bodies)]
    axis = jnp.einsum("jab,jb->ja", rot, jnp.asarray(kin.joint_axis[bodies], q.dtype))
    anchor = xpos[jnp.array(bodies)] + jnp.einsum("jab,jb->ja", rot, jnp.asarray(kin.joint_anchor[bodies], q.dtype))
    return xpos, xrot, jnp.concatenate([axis, jnp.cross(anchor, axis)], -1)


def _body_motion(chain: Chain, q: Array, v: Array, a: Array, gravity: Array) -> tuple[Array, ...]:
    """Moving bodies' positions and rotations, joint screws (nv, 6), body velocities and accelerations (nb, 6).

    The accelerations include ``-gravity`` (the base accelerates upwards), as in RNEA.
    """
    xpos, xrot, s = poses(chain, q)
    support = jnp.asarray(chain.support, q.dtype)
    vel = support @ (s * v[:, None])
    sdot = _motion_cross(vel[chain.joint_body], s) * v[:, None]  # ṡ_j = V_body(j) × s_j
    acc = support @ (s * a[:, None] + sdot) + jnp.concatenate([jnp.zeros(3, q.dtype), -gravity])
    return xpos[chain.moving], xrot[chain.moving], s, vel, acc


def inverse_dynamics(chain: Chain, theta: Array, q: Array, v: Array, a: Array, gravity: Array) -> Array:
    """RNEA: rigid-body joint forces (nv,) for parameters ``theta`` (nb, 10) and ``gravity`` (3,)."""
    pos, rot, s, vel, acc = _body_motion(chain, q, v, a, gravity)
    m, h, inertia = _world_inertia(theta, pos, rot)
    f = _apply_inertia(m, h, inertia, acc) + _force_cross(vel, _apply_inertia(m, h, inertia, vel))
    return jnp.einsum("ij,ix,jx->j", jnp.asarray(chain.support, q.dtype), f, s)


def _to_body(pos: Array, rot: Array, x: Array) -> Array:
    """Motion vectors (..., 6) from world-origin coordinates to body coordinates (origin ``pos``, axes ``rot``)."""
    w, u = x[..., :3], x[..., 3:] + jnp.cross(x[..., :3], pos)
    return jnp.concatenate([jnp.einsum("...ji,...j->...i", rot, w), jnp.einsum("...ji,...j->...i", rot, u)], -1)


def _body_regressor(vel: Array, acc: Array) -> Array:
    """Y (..., 6, 10) with ``I A + V ×* I V = Y θ`` in body coordinates, θ in Pinocchio order."""
    w, u, alpha, lin = vel[..., :3], vel[..., 3:], acc[..., :3], acc[..., 3:]
    origin_acc = lin + jnp.cross(w, u)  # classical acceleration of the body origin

    def inertia_map(x):  # (..., 3, 6): I x = map(x) [Ixx, Ixy, Iyy, Ixz, Iyz, Izz]
        x0, x1, x2, z = x[..., 0], x[..., 1], x[..., 2], jnp.zeros_like(x[..., 0])
        return jnp.stack([jnp.stack([x0, x1, z, x2, z, z], -1), jnp.stack([z, x0, x1, z, x2, z], -1),
                          jnp.stack([z, z, z, x0, x1, x2], -1)], -2)  # fmt: skip

    sw = R.skew(w)
    moment = jnp.concatenate([jnp.zeros_like(origin_acc)[..., None], -R.skew(origin_acc),
                              inertia_map(alpha) + sw @ inertia_map(w)], -1)  # fmt: skip
    force = jnp.concatenate([origin_acc[..., None], R.skew(alpha) + sw @ sw, jnp.zeros((*w.shape, 6), w.dtype)], -1)
    return jnp.concatenate([moment, force], -2)


def regressor(chain: Chain, q: Array, v: Array, a: Array, gravity: Array) -> Array:
    """Joint-torque regressor W (nv, 10 nb): ``W θ = inverse_dynamics(θ)``, θ stacked per moving body."""
    pos, rot, s, vel, acc = _body_motion(chain, q, v, a, gravity)
    y = _body_regressor(_to_body(pos, rot, vel), _to_body(pos, rot, acc))  # (nb, 6, 10)
    screws = _to_body(pos[:, None], rot[:, None], s)  # (nb, nv, 6) each joint's screw in each body frame
    w = jnp.einsum("bj,bjx,bxk->jbk", jnp.asarray(chain.support, q.dtype), screws, y)
    return w.reshape(len(v), -1)


def mass_matrix(chain: Chain, theta: Array, q: Array) -> Array:
    """CRBA in Jacobian form ``M = sum_i J_iᵀ I_i J_i``, (nv, nv)."""
    xpos, xrot, s = poses(chain, q)
    jac = jnp.asarray(chain.support, q.dtype)[:, :, None] * s  # (nb, nv, 6)
    m, h, inertia = _world_inertia(theta, xpos[chain.moving], xrot[chain.moving])
    return jnp.einsum("bix,bjx->ij", jac, _apply_inertia(m[:, None], h[:, None], inertia[:, None], jac))


def christoffel_coriolis(dm: Array, v: Array) -> Array:
    """C from ``dm[i, j, k] = ∂M_ij/∂q_k``: ``C_ij = ½ sum_k (∂_k M_ij + ∂_j M_ik - ∂_i M_jk) v_k``."""
    return 0.5 * (jnp.einsum("ijk,k->ij", dm, v) + jnp.einsum("ikj,k->ij", dm, v) - jnp.einsum("jki,k->ij", dm, v))


def mat2quat(rot: Array) -> Array:
    """Unit quaternions (..., 4) (w, x, y, z), w ≥ 0, of rotations (..., 3, 3) (Shepperd's method).

    Not :func:`so101_mjx.robot.rotations.mat_to_quat`: the candidates' sums (``1 + t``, ``1 + 2 r00 - t``)
    are ordered differently and round differently, and the backend's frame quaternions keep their bits.
    """
    r = lambda i, j: rot[..., i, j]  # noqa: E731
    t = r(0, 0) + r(1, 1) + r(2, 2)
    cand = jnp.stack([
        jnp.stack([1 + t, r(2, 1) - r(1, 2), r(0, 2) - r(2, 0), r(1, 0) - r(0, 1)], -1),
        jnp.stack([r(2, 1) - r(1, 2), 1 + 2 * r(0, 0) - t, r(0, 1) + r(1, 0), r(0, 2) + r(2, 0)], -1),
        jnp.stack([r(0, 2) - r(2, 0), r(0, 1) + r(1, 0), 1 + 2 * r(1, 1) - t, r(1, 2) + r(2, 1)], -1),
        jnp.stack([r(1, 0) - r(0, 1), r(0, 2) + r(2, 0), r(1, 2) + r(2, 1), 1 + 2 * r(2, 2) - t], -1),
    ], -2)  # fmt: skip
    best = jnp.argmax(jnp.stack([t, r(0, 0), r(1, 1), r(2, 2)], -1), -1)
    quat = jnp.take_along_axis(cand, best[..., None, None], -2)[..., 0, :]
    quat = quat / jnp.linalg.norm(quat, axis=-1, keepdims=True)
    return jnp.where(quat[..., :1] < 0, -quat, quat)


def homogeneous(pos, rot, xp=np):
    """4x4 transforms (..., 4, 4) from positions (..., 3) and rotations (..., 3, 3)."""
    top = xp.concatenate([rot, pos[..., None]], -1)
    bottom = xp.broadcast_to(xp.asarray([0.0, 0.0, 0.0, 1.0], dtype=pos.dtype), (*pos.shape[:-1], 1, 4))
    return xp.concatenate([top, bottom], -2)
