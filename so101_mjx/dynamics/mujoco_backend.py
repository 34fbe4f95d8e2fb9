"""MuJoCo C reference of :class:`~so101_mjx.dynamics.backend.DynamicsBackend`: numpy, one configuration per call.

The conventions are :mod:`so101_mjx.dynamics.backend`'s; this backend is what the JAX one is tested against.
"""

from __future__ import annotations

import copy
from pathlib import Path

import mujoco
import numpy as np

from so101_mjx.dynamics.backend import ChainBackend
from so101_mjx.dynamics.rigid_body import homogeneous
from so101_mjx.errors import InputError
from so101_mjx.robot import rotations as R


class MujocoBackend(ChainBackend):
    """MuJoCo C reference, numpy, one configuration per call (inputs of shape (nv,))."""

    def __init__(self, model_path: str | Path | mujoco.MjModel = "so101", **kwargs):
        super().__init__(model_path, **kwargs)
        self._m = m = copy.deepcopy(self._model)
        if not self.include_armature:
            m.dof_armature[:] = 0.0
        off = mujoco.mjtDisableBit
        m.opt.disableflags |= off.mjDSBL_SPRING | off.mjDSBL_DAMPER | off.mjDSBL_CONSTRAINT | off.mjDSBL_ACTUATION
        self._d = mujoco.MjData(m)
        ids = [m.joint(n).id for n in self.chain.kin.joints]
        self._qadr, self._dof = m.jnt_qposadr[ids], m.jnt_dofadr[ids]
        self._bodies = [m.body(n).id for n in self.chain.body_names]
        self._sites = [m.site(n).id for n in self.chain.kin.site_names]
        self._frame_bodies = [m.body(n).id for n in self.chain.kin.body_names]

    def _asarray(self, x, name: str) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        if x.shape != (self.nv,):
            raise InputError(f"{name} must have shape ({self.nv},) for joints {self.chain.kin.joints}, got {x.shape}")
        return x

    def _state(self, q, v=None) -> mujoco.MjData:
        """Set qpos (and qvel), run kinematics, com positions (and com velocities)."""
        d = self._d
        d.qpos[self._qadr] = self._asarray(q, "q")
        d.qvel[:] = 0.0
        mujoco.mj_kinematics(self._m, d)
        mujoco.mj_comPos(self._m, d)
        if v is not None:
            d.qvel[self._dof] = self._asarray(v, "v")
            mujoco.mj_comVel(self._m, d)
        return d

    def _rne(self, flg_acc: int) -> np.ndarray:
        out = np.zeros(self._m.nv)
        mujoco.mj_rne(self._m, self._d, flg_acc, out)
        return out[self._dof]

    def compute_mass_matrix(self, q) -> np.ndarray:
        d = self._state(q)
        mujoco.mj_makeM(self._m, d)
        full = np.zeros((self._m.nv, self._m.nv))
        mujoco.mj_fullM(self._m, d, full)
        return full[np.ix_(self._dof, self._dof)]

    def compute_bias(self, q, v) -> np.ndarray:
        self._state(q, v)
        return self._rne(0)

    def compute_gravity_vector(self, q) -> np.ndarray:
        return self.compute_bias(q, np.zeros(self.nv))

    def compute_coriolis_matrix(self, q, v) -> np.ndarray:
        """Polarisation: ``C e_j = (b(v + e_j) - b(v - e_j)) / 4``, exact since b is quadratic in v."""
        v = self._asarray(v, "v")
        eye = np.eye(self.nv)
        return np.stack([self.compute_bias(q, v + e) - self.compute_bias(q, v - e) for e in eye], -1) / 4

    def compute_inverse_dynamics(self, q, v, a) -> np.ndarray:
        d = self._d
        d.qpos[self._qadr], d.qvel[:], d.qacc[:] = self._asarray(q, "q"), 0.0, 0.0
        d.qvel[self._dof], d.qacc[self._dof] = self._asarray(v, "v"), self._asarray(a, "a")
        mujoco.mj_inverse(self._m, d)
        return d.qfrc_inverse[self._dof].copy()

    def compute_forward_dynamics(self, q, v, tau) -> np.ndarray:
        d = self._d
        d.qpos[self._qadr], d.qvel[:], d.qfrc_applied[:] = self._asarray(q, "q"), 0.0, 0.0
        d.qvel[self._dof], d.qfrc_applied[self._dof] = self._asarray(v, "v"), self._asarray(tau, "tau")
        mujoco.mj_forward(self._m, d)
        return d.qacc[self._dof].copy()

    def compute_regressor(self, q, v, a) -> np.ndarray:
        """Columns from ``mj_rne`` with ``cinert`` set to the image of each unit parameter vector."""
        d = self._state(q, v)
        d.qacc[:] = 0.0
        d.qacc[self._dof] = self._asarray(a, "a")
        cols = []
        for b in self._bodies:
            origin = d.subtree_com[self._m.body_rootid[b]]
            rot = d.xmat[b].reshape(3, 3)
            for unit in np.eye(10):
                d.cinert[:] = 0.0
                d.cinert[b] = _cinert(unit, d.xpos[b] - origin, rot)
                cols.append(self._rne(1))
        mujoco.mj_comPos(self._m, d)  # restore cinert
        return np.stack(cols, -1)

    def compute_dynamics_derivatives(self, q, v, eps: float = 1e-6) -> dict[str, np.ndarray]:
        """Central finite differences of M, C, g (step ``eps``); ``dC_dv`` is exact (C is linear in v)."""
        q, v = self._asarray(q, "q"), self._asarray(v, "v")

        def diff(f):
            return np.stack([(f(q + eps * e) - f(q - eps * e)) / (2 * eps) for e in np.eye(self.nq)], -1)

        return {
            "dM_dq": diff(self.compute_mass_matrix),
            "dC_dq": diff(lambda x: self.compute_coriolis_matrix(x, v)),
            "dC_dv": np.stack([self.compute_coriolis_matrix(q, e) for e in np.eye(self.nv)], -1),
            "dg_dq": diff(self.compute_gravity_vector),
        }

    def compute_forward_kinematics(self, q) -> dict[str, dict[str, np.ndarray]]:
        d = self._state(q)
        pos = np.concatenate([d.xpos[self._frame_bodies], d.site_xpos[self._sites]])
        rot = np.concatenate([d.xmat[self._frame_bodies], d.site_xmat[self._sites]]).reshape(-1, 3, 3)
        out = {}
        for name, p, r in zip(self.chain.frame_names, pos, rot):
            out[name] = {"position": p, "orientation": r, "quaternion": R.mat_to_quat_np(r),
                         "transformation": homogeneous(p, r)}
        return out

    def compute_jacobian(self, q, frame: str) -> np.ndarray:
        i = self.get_frame_id(frame)
        d = self._state(q)
        jacp, jacr = np.zeros((3, self._m.nv)), np.zeros((3, self._m.nv))
        nb = len(self._frame_bodies)
        if i < nb:
            mujoco.mj_jacBody(self._m, d, jacp, jacr, self._frame_bodies[i])
        else:
            mujoco.mj_jacSite(self._m, d, jacp, jacr, self._sites[i - nb])
        return np.concatenate([jacp, jacr])[:, self._dof]


def _cinert(theta: np.ndarray, offset: np.ndarray, rot: np.ndarray) -> np.ndarray:
    """MuJoCo ``cinert`` (10,) of parameters θ for a body at ``offset`` from the com frame origin.

    Layout: inertia about the origin (xx, yy, zz, xy, xz, yz), first moment (3,), mass; world axes.
    """
    m, h = theta[0], rot @ theta[1:4]
    i_local = theta[[4, 5, 7, 5, 6, 8, 7, 8, 9]].reshape(3, 3)
    s, sh = np.cross(np.eye(3), offset), np.cross(np.eye(3), h)  # skew(offset), skew(h)
    inertia = rot @ i_local @ rot.T - m * s @ s - s @ sh - sh @ s
    return np.array([*inertia[[0, 1, 2, 0, 0, 1], [0, 1, 2, 1, 2, 2]], *(h + m * offset), m])


MuJoCoBackend = MujocoBackend  # FIGAROH's spelling of the name
