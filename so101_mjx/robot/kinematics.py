"""A lean JAX kinematic chain of the SO-101, built once from an ``MjModel``.

Forward kinematics and analytic geometric Jacobians as pure functions of the joint angles,
vmappable over any leading batch axes, jit/vmap/grad-safe, in float32 or float64 (the dtype of
``q``). It reproduces MuJoCo's ``mj_kinematics`` composition (body offset, then hinge rotation
about the joint anchor), so in float64 it equals MuJoCo C to round-off (~1e-16 m).

Shapes: ``q`` is ``(..., n)`` with ``n = len(kin.joints)``; positions ``(..., 3)``; rotation
matrices ``(..., 3, 3)`` (columns are the frame's axes in world coordinates); Jacobians
``(..., 3, n)``. Joints of the model not in ``kin.joints`` stay at their ``qpos0``.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax.numpy as jnp
import mujoco
import numpy as np
from jax import Array

from so101_mjx.errors import InputError
from so101_mjx.robot import rotations as R
from so101_mjx.robot.scenes import ROBOT_JOINTS


@dataclass(frozen=True, eq=False)
class Kinematics:
    """Static description of a serial/tree chain; every method is a pure JAX function.

    Build with :meth:`from_model`. Bodies are those of the subtree rooted at ``root`` (the
    world frame is the root's parent), in MuJoCo's (topological) order.
    """

    joints: tuple[str, ...]
    body_names: tuple[str, ...]
    body_parent: tuple[int, ...]  # index into body_names, -1 for the root
    body_pos: np.ndarray  # (nb, 3) offset in the parent frame
    body_rot: np.ndarray  # (nb, 3, 3)
    root_pos: np.ndarray  # (3,) world pose of the root's parent frame
    root_rot: np.ndarray  # (3, 3)
    body_joint: tuple[int, ...]  # index into joints, -1 = fixed, -2 = hinge held at qpos0
    joint_axis: np.ndarray  # (nb, 3) local hinge axis per body (unused when fixed)
    joint_anchor: np.ndarray  # (nb, 3) local hinge anchor per body
    joint_qpos0: np.ndarray  # (nb,)
    site_names: tuple[str, ...]
    site_body: tuple[int, ...]
    site_pos: np.ndarray  # (ns, 3)
    site_rot: np.ndarray  # (ns, 3, 3)

    @classmethod
    def from_model(cls, model: mujoco.MjModel, joints: tuple[str, ...] = ROBOT_JOINTS,
                   root: str = "base") -> Kinematics:
        """Extract the chain below body ``root``, driven by the hinge ``joints`` (in this order)."""
        root_id = model.body(root).id
        ids = [b for b in range(model.nbody) if _descends_from(model, b, root_id)]
        index = {b: i for i, b in enumerate(ids)}
        joint_index = {model.joint(n).id: i for i, n in enumerate(joints)}
        body_joint, axis, anchor, qpos0 = [], np.zeros((len(ids), 3)), np.zeros((len(ids), 3)), np.zeros(len(ids))
        for i, b in enumerate(ids):
            njnt = model.body_jntnum[b]
            if njnt > 1 or (njnt == 1 and model.jnt_type[model.body_jntadr[b]] != mujoco.mjtJoint.mjJNT_HINGE):
                raise InputError(f"body {model.body(b).name!r}: only bodies with at most one hinge are supported")
            if njnt == 0:
                body_joint.append(-1)
                continue
            j = model.body_jntadr[b]
            body_joint.append(joint_index.get(j, -2))
            axis[i], anchor[i], qpos0[i] = model.jnt_axis[j], model.jnt_pos[j], model.qpos0[model.jnt_qposadr[j]]
        unknown = set(joints) - {model.joint(j).name for j in joint_index}
        if unknown:
            raise InputError(f"joints {sorted(unknown)} are not in the chain below {root!r}")
        sites = [s for s in range(model.nsite) if model.site_bodyid[s] in index]
        parent = model.body_parentid[root_id]
        data = mujoco.MjData(model)
        mujoco.mj_kinematics(model, data)
        return cls(
            joints=tuple(joints),
            body_names=tuple(model.body(b).name for b in ids),
            body_parent=tuple(index.get(model.body_parentid[b], -1) for b in ids),
            body_pos=np.array([model.body_pos[b] for b in ids]),
            body_rot=np.array([R.quat_to_mat_np(model.body_quat[b]) for b in ids]),
            root_pos=data.xpos[parent].copy(),
            root_rot=data.xmat[parent].reshape(3, 3).copy(),
            body_joint=tuple(body_joint),
            joint_axis=axis,
            joint_anchor=anchor,
            joint_qpos0=qpos0,
            site_names=tuple(model.site(s).name for s in sites),
            site_body=tuple(index[model.site_bodyid[s]] for s in sites),
            site_pos=np.array([model.site_pos[s] for s in sites]),
            site_rot=np.array([R.quat_to_mat_np(model.site_quat[s]) for s in sites]),
        )

    @property
    def nq(self) -> int:
        return len(self.joints)

    def body_id(self, name: str) -> int:
        """Index of a body in ``body_names``; ValueError listing the valid names otherwise."""
        if name not in self.body_names:
            raise InputError(f"unknown body {name!r}; expected one of {self.body_names}")
        return self.body_names.index(name)

    def site_id(self, name: str) -> int:
        """Index of a site in ``site_names``; ValueError listing the valid names otherwise."""
        if name not in self.site_names:
            raise InputError(f"unknown site {name!r}; expected one of {self.site_names}")
        return self.site_names.index(name)

    def check_q(self, q) -> Array:
        """``q`` as a floating JAX array of shape (..., nq); ValueError otherwise."""
        q = jnp.asarray(q)
        if q.ndim < 1 or q.shape[-1] != self.nq:
            raise InputError(f"q must have shape (..., {self.nq}) for joints {self.joints}, got {q.shape}")
        if not jnp.issubdtype(q.dtype, jnp.floating):
            q = q.astype(jnp.result_type(float))
        return q

    def forward(self, q) -> tuple[Array, Array]:
        """World poses of every body: positions (..., nb, 3) and rotations (..., nb, 3, 3)."""
        q = self.check_q(q)
        dt = q.dtype
        batch = q.shape[:-1]
        c = lambda x: jnp.asarray(x, dtype=dt)  # noqa: E731
        xpos: list[Array] = []
        xrot: list[Array] = []
        for i, parent in enumerate(self.body_parent):
            ppos = c(self.root_pos) if parent < 0 else xpos[parent]
            prot = c(self.root_rot) if parent < 0 else xrot[parent]
            pos = ppos + jnp.einsum("...ij,j->...i", prot, c(self.body_pos[i]))
            rot = jnp.einsum("...ij,jk->...ik", prot, c(self.body_rot[i]))
            j = self.body_joint[i]
            if j != -1:
                angle = (q[..., j] if j >= 0 else jnp.zeros(batch, dt)) - c(self.joint_qpos0[i])
                anchor = pos + jnp.einsum("...ij,j->...i", rot, c(self.joint_anchor[i]))
                rot = rot @ R.axis_angle_to_mat(c(self.joint_axis[i]), angle)  # MuJoCo's hinge rotation
                pos = anchor - jnp.einsum("...ij,j->...i", rot, c(self.joint_anchor[i]))
            xpos.append(jnp.broadcast_to(pos, (*batch, 3)))
            xrot.append(jnp.broadcast_to(rot, (*batch, 3, 3)))
        return jnp.stack(xpos, -2), jnp.stack(xrot, -3)

    def body_pose(self, q, body: str) -> tuple[Array, Array]:
        """World position (..., 3) and rotation (..., 3, 3) of one body."""
        i = self.body_id(body)
        xpos, xrot = self.forward(q)
        return xpos[..., i, :], xrot[..., i, :, :]

    def site_pose(self, q, site: str) -> tuple[Array, Array]:
        """World position (..., 3) and rotation (..., 3, 3) of one site."""
        return self._site_pose(self.forward(q), site)

    def _site_pose(self, frames: tuple[Array, Array], site: str) -> tuple[Array, Array]:
        s = self.site_id(site)
        b = self.site_body[s]
        pos, rot = frames[0][..., b, :], frames[1][..., b, :, :]
        dt = pos.dtype
        site_pos = pos + jnp.einsum("...ij,j->...i", rot, jnp.asarray(self.site_pos[s], dt))
        return site_pos, rot @ jnp.asarray(self.site_rot[s], dt)

    def point(self, q, site: str, offset=None) -> Array:
        """World position (..., 3) of the site origin plus ``offset`` (3,) given in the site frame."""
        return _offset_point(*self.site_pose(q, site), offset)

    def joint_frames(self, q) -> tuple[Array, Array, tuple[int, ...]]:
        """World hinge axes (..., nq, 3), anchors (..., nq, 3) and each joint's body index."""
        return self._joint_frames(self.forward(q))

    def _joint_frames(self, frames: tuple[Array, Array]) -> tuple[Array, Array, tuple[int, ...]]:
        xpos, xrot = frames
        bodies = tuple(self.body_joint.index(j) for j in range(self.nq))
        dt = xpos.dtype
        axes = jnp.stack([xrot[..., b, :, :] @ jnp.asarray(self.joint_axis[b], dt) for b in bodies], -2)
        anchors = jnp.stack(
            [xpos[..., b, :] + xrot[..., b, :, :] @ jnp.asarray(self.joint_anchor[b], dt) for b in bodies], -2
        )
        return axes, anchors, bodies

    def _ancestors(self, body: int) -> set[int]:
        chain = set()
        while body >= 0:
            chain.add(body)
            body = self.body_parent[body]
        return chain

    def jacobian(self, q, site: str, offset=None) -> tuple[Array, Array]:
        """Geometric Jacobians of a site point (site origin + site-frame ``offset``).

        Returns ``(jacp, jacr)``, each (..., 3, nq): d(point)/dq and the angular-velocity map,
        matching ``mj_jacSite`` / ``mj_jac`` restricted to ``kin.joints``.
        """
        return self.site_kinematics(q, site, offset)[2:]

    def site_kinematics(self, q, site: str, offset=None) -> tuple[Array, Array, Array, Array]:
        """Everything IK needs from ONE forward pass: the point (..., 3) (site origin + site-frame
        ``offset``), the site rotation (..., 3, 3) and the Jacobians ``jacp, jacr`` (..., 3, nq)."""
        frames = self.forward(q)
        pos, rot = self._site_pose(frames, site)
        p = _offset_point(pos, rot, offset)
        axes, anchors, bodies = self._joint_frames(frames)
        moves = self._ancestors(self.site_body[self.site_id(site)])
        mask = jnp.asarray([b in moves for b in bodies], p.dtype)[:, None]
        jacr = axes * mask
        jacp = jnp.cross(jacr, p[..., None, :] - anchors)
        return p, rot, jnp.swapaxes(jacp, -1, -2), jnp.swapaxes(jacr, -1, -2)


def _offset_point(pos: Array, rot: Array, offset) -> Array:
    if offset is None:
        return pos
    return pos + jnp.einsum("...ij,...j->...i", rot, jnp.asarray(offset, pos.dtype))


def _descends_from(model: mujoco.MjModel, body: int, root: int) -> bool:
    while body > 0:
        if body == root:
            return True
        body = model.body_parentid[body]
    return root == 0 and body == 0
