"""Rigid-body dynamics of the SO-101 behind FIGAROH's ``DynamicsBackend`` interface.

Three backends, one set of conventions (:class:`DynamicsBackend` is the interface;
:class:`ChainBackend` the hinge chain of an ``MjModel`` that the first two share):

- :class:`JaxBackend`: RNEA / CRBA over the kinematic chain in JAX, any leading batch axes,
  jit/vmap/grad-safe, float32 or float64 (the inputs' dtype); Coriolis and derivatives by autodiff.
- :class:`~so101_mjx.dynamics.mujoco_backend.MujocoBackend`: MuJoCo C (``mj_fullM``, ``mj_rne``,
  ``mj_inverse``, ``mj_forward``) with numpy, one configuration per call: the reference.
- :class:`~so101_mjx.dynamics.pinocchio_backend.PinocchioBackend`: Pinocchio (the ``pinocchio``
  extra), numpy, one configuration per call, with the exceptions listed in its module.

Equation of motion (rigid body)::

    M(q) a + C(q, v) v + g(q) = tau

Conventions (both backends):

- ``q, v, a, tau``: (..., nv) in the order of ``joints`` (default: the six hinges of
  ``ROBOT_JOINTS``); rad, rad/s, rad/s², N·m. Hinges only, so ``nq == nv``, ``q2 ⊖ q1 = q2 - q1``
  and ``q ⊕ v = q + v``. Joints of the model not in ``joints`` stay at ``qpos0``.
- Armature: excluded by default, so ``M`` is the rigid-body mass matrix. ``include_armature=True``
  adds ``diag(dof_armature)`` to ``M``, hence ``armature * a`` to inverse dynamics and to the
  inertia of forward dynamics. MujocoBackend realises both by zeroing (or keeping)
  ``dof_armature`` in a private model copy, so ``mj_fullM``, ``mj_inverse`` and ``mj_forward`` agree.
- Passive forces (damping, stiffness, frictionloss), joint limits, contacts and actuators are
  never included: ``tau`` is the total generalised joint force. A caller adds actuator forces,
  ``-damping * v`` etc. to ``tau`` itself. MujocoBackend disables them (``mjDSBL_SPRING``,
  ``DAMPER``, ``CONSTRAINT``, ``ACTUATION``) and applies ``tau`` through ``qfrc_applied``.
- Gravity is ``model.opt.gravity``; it enters ``g``, inverse and forward dynamics.
- ``C(q, v)`` is the Christoffel form ``C_ij = sum_k Γ_ijk v_k`` with
  ``Γ_ijk = ½ (∂M_ij/∂q_k + ∂M_ik/∂q_j - ∂M_jk/∂q_i)`` (rigid-body ``M``): ``C v`` is the
  velocity-product bias and ``Ṁ - 2C`` is skew-symmetric. Since ``Γ_ijk = Γ_ikj``,
  ``C = ½ ∂(C v)/∂v``, which MujocoBackend evaluates exactly by polarisation of ``mj_rne``.
- Derivatives: ``dM_dq[i, j, k] = ∂M_ij/∂q_k``, ``dC_dq[i, j, k] = ∂C_ij/∂q_k``,
  ``dC_dv[i, j, k] = ∂C_ij/∂v_k``, ``dg_dq[i, k] = ∂g_i/∂q_k``.
- Frames: every body of the chain below its root (``base`` on the SO-101; the root included) then every site on it,
  named as in the MJCF; ``get_frame_id`` indexes ``get_frame_names()``. Forward kinematics maps
  each name to ``position`` (3,), ``orientation`` (3, 3) (columns are the frame axes in world),
  ``quaternion`` (4,) (w, x, y, z) with w ≥ 0, ``transformation`` (4, 4). Jacobians are (6, nv),
  ``[linear; angular]``, world-aligned, of the frame origin (``mj_jacBody`` / ``mj_jacSite``).
- Inertial parameters (``get_inertias``: :class:`BodyInertia` objects): one 10-vector per moving body (bodies with a
  chain joint at or above them; the fixed ``base`` has none), in Pinocchio's dynamic-parameter order
  ``[m, m cx, m cy, m cz, Ixx, Ixy, Iyy, Ixz, Iyz, Izz]``, in the body frame, inertia about the
  body origin (``I_com + m (|c|² 1 - c cᵀ)``). The regressor ``W(q, v, a)`` (nv, 10 nb) satisfies
  ``W θ = tau`` for the rigid-body inverse dynamics (armature excluded even with
  ``include_armature``, which then adds ``armature * a``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, NoReturn

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from jax import Array

from so101_mjx.dynamics import rigid_body as rb
from so101_mjx.dynamics.rigid_body import Chain
from so101_mjx.errors import InputError
from so101_mjx.robot.scenes import load_model
from so101_mjx.robot.urdf import urdf_xml


class ModelLoadError(InputError, RuntimeError):
    """A model file a backend cannot load: FIGAROH's RuntimeError, and this library's InputError."""


class BodyInertia:
    """One body's inertia in Pinocchio's terms, from its dynamic parameters (10,) (see the module docstring).

    ``mass`` [kg], ``lever`` (3,) centre of mass in the body frame [m] (zeros when massless),
    ``inertia`` (3, 3) about the centre of mass, body axes [kg m²]; ``toDynamicParameters()`` and
    ``np.asarray`` give the 10-vector.
    """

    def __init__(self, parameters: np.ndarray):
        self._theta = np.array(parameters, dtype=np.float64).reshape(10)

    mass = property(lambda self: float(self._theta[0]))
    lever = property(lambda self: self._theta[1:4] / self.mass if self.mass else np.zeros(3))

    @property
    def inertia(self) -> np.ndarray:
        c = self.lever
        about_origin = self._theta[[4, 5, 7, 5, 6, 8, 7, 8, 9]].reshape(3, 3)
        return about_origin - self.mass * (c @ c * np.eye(3) - np.outer(c, c))

    def toDynamicParameters(self) -> np.ndarray:  # Pinocchio's name
        return self._theta.copy()

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        return self._theta.astype(dtype or np.float64)

    def __repr__(self) -> str:
        return f"BodyInertia(mass={self.mass:g}, lever={self.lever.tolist()})"


class DynamicsBackend(ABC):
    """FIGAROH's dynamics-backend interface (``DynamicsBackend``); see the module docstring for the conventions.

    Args:
        model_path: where the model came from (a path or scene name; None for an in-memory model).
        kwargs: backend options, returned by :attr:`config`.

    The optional methods raise ``NotImplementedError`` naming the backend unless it implements them.
    """

    regressor_inertia_start = 0
    """Index in :meth:`get_inertias` of the body of the regressor's first 10 columns."""

    def __init__(self, model_path: str | None, **kwargs):
        self._model_path = model_path
        self._config = dict(kwargs)

    nq = property(abstractmethod(lambda self: None), doc="Number of position variables.")
    nv = property(abstractmethod(lambda self: None), doc="Number of velocity variables.")
    model_format = property(abstractmethod(lambda self: None), doc="Model format: 'mjcf' or 'urdf'.")
    model_path = property(lambda self: self._model_path,
                          doc="Path or scene name of the model; None for an in-memory one.")
    config = property(lambda self: dict(self._config), doc="Backend options.")

    @abstractmethod
    def compute_mass_matrix(self, q): """M(q), (..., nv, nv)."""

    @abstractmethod
    def compute_coriolis_matrix(self, q, v): """Christoffel-form C(q, v), (..., nv, nv)."""

    @abstractmethod
    def compute_gravity_vector(self, q): """g(q), (..., nv), N·m."""

    @abstractmethod
    def compute_bias(self, q, v): """C(q, v) v + g(q), (..., nv), N·m."""

    @abstractmethod
    def compute_forward_kinematics(self, q) -> dict[str, dict[str, Any]]: """World pose of every frame."""

    @abstractmethod
    def compute_jacobian(self, q, frame: str): """Geometric Jacobian (..., 6, nv), [linear; angular]."""

    @abstractmethod
    def compute_regressor(self, q, v, a): """W(q, v, a), (..., nv, 10 nb), ``W θ = tau``."""

    @abstractmethod
    def compute_inverse_dynamics(self, q, v, a): """tau (..., nv), N·m."""

    @abstractmethod
    def compute_forward_dynamics(self, q, v, tau): """a (..., nv), rad/s²."""

    def _unimplemented(self, name: str) -> NoReturn:
        raise NotImplementedError(f"{type(self).__name__} does not implement {name}")

    def compute_dynamics_derivatives(self, q, v) -> dict[str, Any]:
        """dM_dq, dC_dq, dC_dv, dg_dq (optional)."""
        self._unimplemented("dynamics derivatives")

    def get_joint_names(self) -> list[str]:
        self._unimplemented("get_joint_names")

    def get_frame_names(self) -> list[str]:
        self._unimplemented("get_frame_names")

    def get_inertias(self) -> list:
        """Per-body inertia objects, each with a ``mass``: used to drop massless bodies' regressor columns."""
        self._unimplemented("get_inertias")

    def get_frame_id(self, frame: str) -> int:
        self._unimplemented("get_frame_id")

    def compute_difference(self, q1, q2):
        """``q2 ⊖ q1``, (..., nv)."""
        self._unimplemented("compute_difference")

    def compute_integrate(self, q, v):
        """``q ⊕ v``, (..., nq)."""
        self._unimplemented("compute_integrate")

    def random_configuration(self):
        self._unimplemented("random_configuration")

    def get_model_object(self) -> Any:
        """The simulator's own model object (escape hatch)."""
        self._unimplemented("get_model_object")

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        return None


def load_mujoco_model(model: str | Path) -> mujoco.MjModel:
    """A scene name, MJCF path or URDF path (MuJoCo's URDF import) as an ``MjModel``.

    Raises:
        ModelLoadError: a RuntimeError (FIGAROH's type) and ValueError, naming the model and why.
    """
    if not isinstance(model, (str, Path)):
        raise InputError(f"model must be a scene name, an MJCF or URDF path or an MjModel, got {type(model).__name__}")
    try:  # a URDF keeps every link as a body (MuJoCo would fuse the fixed ones): urdf_xml
        return (mujoco.MjModel.from_xml_string(urdf_xml(model, "model_path")) if str(model).endswith(".urdf")
                else load_model(model))
    except (ValueError, OSError) as err:
        raise ModelLoadError(f"Failed to load model '{model}' with MuJoCo: {err}\n"
                             "Ensure the file is valid URDF or MJCF format.") from err  # fmt: skip


class ChainBackend(DynamicsBackend):
    """The backends over the hinge chain of an ``MjModel``: :class:`JaxBackend` and ``MujocoBackend``.

    Args:
        model_path: a scene name (``"so101"``: the arm alone), an MJCF or URDF path (``str`` or
            ``Path``; URDF through MuJoCo's import) or a compiled ``MjModel``.
        joints: the hinge joints that form ``q`` and ``v``, in this order; None = the SO-101's six
            (``ROBOT_JOINTS``) when the model has them, else every hinge of the model. The chain's
            root is the link ``base`` if the joints are below it, else the top link above them.
        include_armature: add ``diag(dof_armature)`` to ``M`` (and so to ID / FD).
        verbose: print one line when the model is loaded.
    """

    def __init__(self, model_path: str | Path | mujoco.MjModel = "so101", *, joints: tuple[str, ...] | None = None,
                 include_armature: bool = False, verbose: bool = False):  # fmt: skip
        in_memory = isinstance(model_path, mujoco.MjModel)
        model = model_path if in_memory else load_mujoco_model(model_path)
        joints = rb.chain_joints(model, joints)
        super().__init__(None if in_memory else str(model_path), joints=joints, include_armature=bool(include_armature),
                         verbose=bool(verbose))  # fmt: skip
        self._model: mujoco.MjModel = model  # (model_path when in memory)
        self.chain = Chain.from_model(self._model, joints)
        if verbose:
            print(f"MuJoCo model loaded: {self.nq} positions, {self.nv} velocities ({type(self).__name__})")

    nq = property(lambda self: len(self.chain.kin.joints), doc="Number of position variables.")
    nv = property(lambda self: len(self.chain.kin.joints), doc="Number of velocity variables.")
    model_format = property(lambda self: "urdf" if str(self._model_path).endswith(".urdf") else "mjcf",
                            doc="Model format: 'urdf' for a URDF path, else 'mjcf'.")  # fmt: skip
    include_armature = property(lambda self: self._config["include_armature"])

    @abstractmethod
    def _asarray(self, x, name: str): ...

    def get_joint_names(self) -> list[str]:
        return list(self.chain.kin.joints)

    def get_frame_names(self) -> list[str]:
        """Bodies of the chain (its root first), then its sites."""
        return list(self.chain.frame_names)

    def get_frame_id(self, frame: str) -> int:
        """Index of ``frame`` in :meth:`get_frame_names`; ValueError listing the names otherwise."""
        if frame not in self.chain.frame_names:
            raise InputError(f"unknown frame {frame!r}; expected one of {list(self.chain.frame_names)}")
        return self.chain.frame_names.index(frame)

    def get_inertias(self) -> list[BodyInertia]:
        """Inertia of each moving body (names: ``chain.body_names``), in regressor order."""
        return [BodyInertia(theta) for theta in self.chain.params]

    @property
    def parameters(self) -> np.ndarray:
        """Stacked dynamic parameters θ (10 nb,), the column order of the regressor."""
        return self.chain.params.reshape(-1).copy()

    def get_model_object(self) -> mujoco.MjModel:
        return self._model

    def compute_difference(self, q1, q2):
        """``q2 ⊖ q1 = q2 - q1`` (hinges), (..., nv)."""
        return self._asarray(q2, "q2") - self._asarray(q1, "q1")

    def compute_integrate(self, q, v):
        """``q ⊕ v = q + v`` (hinges), (..., nq)."""
        return self._asarray(q, "q") + self._asarray(v, "v")

    def random_configuration(self, rng: np.random.Generator | int | None = None,
                             size: tuple[int, ...] = ()) -> np.ndarray:
        """Uniform configurations within the joint limits, (*size, nq)."""
        lo, hi = self.chain.q_range.T
        return np.random.default_rng(rng).uniform(lo, hi, (*size, self.nq))


class JaxBackend(ChainBackend):
    """Batched, differentiable dynamics in JAX. Inputs (..., nv) broadcast over leading axes."""

    def __init__(self, model_path: str | Path | mujoco.MjModel = "so101", **kwargs):
        super().__init__(model_path, **kwargs)
        c = self.chain
        arm = c.armature if self.include_armature else np.zeros_like(c.armature)

        def params(x):
            return jnp.asarray(c.params, x.dtype)

        def mass(q):
            return rb.mass_matrix(c, params(q), q) + jnp.diag(jnp.asarray(arm, q.dtype))

        def rnea(q, v, a):
            return (rb.inverse_dynamics(c, params(q), q, v, a, jnp.asarray(c.gravity, q.dtype))
                    + jnp.asarray(arm, q.dtype) * a)

        def gravity(q):
            return rnea(q, jnp.zeros_like(q), jnp.zeros_like(q))

        def bias(q, v):
            return rnea(q, v, jnp.zeros_like(q))

        def coriolis(q, v):
            return rb.christoffel_coriolis(jax.jacfwd(mass)(q), v)

        def body_regressor(q, v, a):
            return rb.regressor(c, q, v, a, jnp.asarray(c.gravity, q.dtype))

        def forward(q, v, tau):
            return jnp.linalg.solve(mass(q), tau - bias(q, v))

        def derivatives(q, v):
            return (jax.jacfwd(mass)(q), jax.jacfwd(coriolis)(q, v), jax.jacfwd(coriolis, 1)(q, v),
                    jax.jacfwd(gravity)(q))

        def frames(q):
            xpos, xrot = c.kin.forward(q)
            sb = np.asarray(c.kin.site_body, int)
            spos = xpos[sb] + jnp.einsum("sij,sj->si", xrot[sb], jnp.asarray(c.kin.site_pos, q.dtype))
            srot = xrot[sb] @ jnp.asarray(c.kin.site_rot, q.dtype)
            return jnp.concatenate([xpos, spos]), jnp.concatenate([xrot, srot])

        def jacobians(q):
            """World-aligned Jacobians (nf, 6, nv) of every frame origin."""
            pos = frames(q)[0]
            _, _, s = rb.poses(c, q)
            lin = s[:, 3:] + jnp.cross(s[:, :3], pos[:, None, :])  # (nf, nv, 3): v_O + ω × p
            jac = jnp.concatenate([lin, jnp.broadcast_to(s[:, :3], lin.shape)], -1)
            return jnp.swapaxes(jnp.asarray(c.frame_support, q.dtype)[:, :, None] * jac, -1, -2)

        vec = lambda f, sig: jax.jit(jnp.vectorize(f, signature=sig))  # noqa: E731
        self._fn = {
            "M": vec(mass, "(n)->(n,n)"), "C": vec(coriolis, "(n),(n)->(n,n)"), "g": vec(gravity, "(n)->(n)"),
            "bias": vec(bias, "(n),(n)->(n)"), "ID": vec(rnea, "(n),(n),(n)->(n)"),
            "FD": vec(forward, "(n),(n),(n)->(n)"), "Y": vec(body_regressor, "(n),(n),(n)->(n,p)"),
            "d": vec(derivatives, "(n),(n)->(n,n,n),(n,n,n),(n,n,n),(n,n)"),
            "frames": vec(frames, "(n)->(f,3),(f,3,3)"), "J": vec(jacobians, "(n)->(f,6,n)"),
        }  # fmt: skip

    def _asarray(self, x, name: str) -> Array:
        x = jnp.asarray(x)
        if x.ndim < 1 or x.shape[-1] != self.nv:
            raise InputError(f"{name} must have shape (..., {self.nv}) for joints {self.chain.kin.joints}, "
                             f"got {x.shape}")
        return x if jnp.issubdtype(x.dtype, jnp.floating) else x.astype(jnp.result_type(float))

    def _args(self, **arrays) -> list[Array]:
        xs = [self._asarray(x, name) for name, x in arrays.items()]
        dtype = jnp.result_type(*xs)
        return [x.astype(dtype) for x in xs]

    def compute_mass_matrix(self, q) -> Array:
        return self._fn["M"](*self._args(q=q))

    def compute_coriolis_matrix(self, q, v) -> Array:
        return self._fn["C"](*self._args(q=q, v=v))

    def compute_gravity_vector(self, q) -> Array:
        return self._fn["g"](*self._args(q=q))

    def compute_bias(self, q, v) -> Array:
        return self._fn["bias"](*self._args(q=q, v=v))

    def compute_inverse_dynamics(self, q, v, a) -> Array:
        return self._fn["ID"](*self._args(q=q, v=v, a=a))

    def compute_forward_dynamics(self, q, v, tau) -> Array:
        return self._fn["FD"](*self._args(q=q, v=v, tau=tau))

    def compute_regressor(self, q, v, a) -> Array:
        return self._fn["Y"](*self._args(q=q, v=v, a=a))

    def compute_dynamics_derivatives(self, q, v) -> dict[str, Array]:
        return dict(zip(("dM_dq", "dC_dq", "dC_dv", "dg_dq"), self._fn["d"](*self._args(q=q, v=v))))

    def compute_forward_kinematics(self, q) -> dict[str, dict[str, Array]]:
        pos, rot = self._fn["frames"](*self._args(q=q))
        quat, tf = rb.mat2quat(rot), rb.homogeneous(pos, rot, jnp)
        return {name: {"position": pos[..., i, :], "orientation": rot[..., i, :, :], "quaternion": quat[..., i, :],
                       "transformation": tf[..., i, :, :]}
                for i, name in enumerate(self.chain.frame_names)}  # fmt: skip

    def compute_jacobian(self, q, frame: str) -> Array:
        i = self.get_frame_id(frame)
        return self._fn["J"](*self._args(q=q))[..., i, :, :]
