"""Pinocchio backend of :class:`~so101_mjx.dynamics.backend.DynamicsBackend` (FIGAROH's default).

Pinocchio's algorithms on a ``pin.Model``: CRBA, the Coriolis matrix, generalized gravity, RNEA,
ABA, the joint-torque regressor, frame kinematics and LOCAL frame Jacobians, Lie-group difference
and integration (SE(3) log and exp for a free-flyer root). numpy, one configuration per call.

The model comes from a file or from an existing ``pin.Model`` (:meth:`PinocchioBackend.from_model`):

- the default, ``"so101"`` (or any scene name or ``.xml`` path): the project's MJCF through
  ``pin.buildModelFromMJCF``; top-level ``<default>`` sections are merged first (Pinocchio's
  parser reads only the first), the numbers are left as written;
- a ``.urdf`` path (``str`` or ``Path``): ``pin.buildModelFromUrdf`` with ``package_dirs``.

Armature: MJCF joints carry one, which Pinocchio adds to CRBA, RNEA and ABA. As in the other
backends it is excluded by default (``include_armature=False`` zeroes ``model.armature`` of a
model this backend builds; :meth:`~PinocchioBackend.from_model` keeps the model as given).

Exceptions (FIGAROH's types): ``ImportError`` naming the extra when Pinocchio is missing, a
``RuntimeError`` (:class:`~so101_mjx.dynamics.backend.ModelLoadError`, also a ValueError) with a
hint when the file cannot be loaded, ``ValueError`` for an unknown frame, an unknown option or an
input of the wrong shape.
"""

from __future__ import annotations

import tempfile
import warnings
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import numpy as np

from so101_mjx.dynamics.backend import DynamicsBackend, ModelLoadError
from so101_mjx.errors import InputError
from so101_mjx.robot import rotations as R
from so101_mjx.robot.scenes import scene_path

OPTIONS = ("free_flyer", "isFext", "package_dirs", "verbose", "include_armature")


def import_pinocchio():
    """``pinocchio``, imported on first use; ImportError naming the extra when it is not installed."""
    try:
        import pinocchio
    except ImportError as err:
        raise ImportError('Pinocchio is not installed. Install with: pip install "so101-mjx[pinocchio]" (or: pip '
                          'install pin)') from err
    return pinocchio


def _check_options(kwargs: dict) -> None:
    unknown = sorted(set(kwargs) - set(OPTIONS))
    if unknown:
        raise InputError(f"unknown PinocchioBackend option(s) {unknown}; allowed: {list(OPTIONS)}")


def _mjcf_for_pinocchio(path: Path, folder: str) -> str:
    """A copy of MJCF ``path`` in ``folder`` that Pinocchio's parser reads: one top-level ``<default>``
    (the others' classes moved into it) and absolute include / asset paths; numbers untouched."""
    root = ET.parse(path).getroot()
    defaults = root.findall("default")
    for extra in defaults[1:]:
        defaults[0].extend(list(extra))
        root.remove(extra)
    for include in root.iter("include"):
        include.set("file", str(path.parent / include.get("file", "")))
    for compiler in root.iter("compiler"):
        for key in ("meshdir", "texturedir", "assetdir"):
            value = compiler.get(key)
            if value is not None:
                compiler.set(key, str(path.parent / value))
    out = Path(folder) / path.name
    ET.ElementTree(root).write(out)
    return str(out)


def _build(pin, model_path: str | Path, root_joint, package_dirs) -> Any:
    path = Path(model_path) if str(model_path).endswith((".urdf", ".xml")) else scene_path(str(model_path))
    if path.suffix == ".urdf":  # the kinematic tree only: no geometry, so no mesh is read
        return pin.buildModelsFromUrdf(str(path), package_dirs=package_dirs, root_joint=root_joint,
                                       geometry_types=[])[0]
    with tempfile.TemporaryDirectory() as folder:
        mjcf = _mjcf_for_pinocchio(path, folder)
        if root_joint is None:
            return pin.buildModelFromMJCF(mjcf)
        with warnings.catch_warnings():  # this overload is deprecated for the one with constraints
            warnings.simplefilter("ignore", DeprecationWarning)
            built = pin.buildModelFromMJCF(mjcf, root_joint, "root_joint")
        return built[0] if isinstance(built, tuple) else built


class PinocchioBackend(DynamicsBackend):
    """Pinocchio dynamics (FIGAROH's ``DynamicsBackend``); see the module docstring.

    Args:
        model_path: ``"so101"`` (default), a scene name, an MJCF (``.xml``) or URDF (``.urdf``) path.
        free_flyer: add a free-flyer root joint (``isFext`` is an alias); nq = 7 + arm, nv = 6 + arm,
            the root's configuration ``[x, y, z, qx, qy, qz, qw]``, its velocity ``[linear; angular]``
            in the root frame.
        package_dirs: folders in which a URDF's ``package://`` meshes are resolved, forwarded to
            Pinocchio's URDF parser (the dynamics read no mesh; an MJCF ignores it).
        verbose: print one line when the model is loaded.
        include_armature: keep the model's armature (see the module docstring).
    """

    regressor_inertia_start = 1  # get_inertias() starts with the universe, which has no regressor columns

    def __init__(self, model_path: str | Path = "so101", **kwargs):
        pin = import_pinocchio()
        _check_options(kwargs)
        if not isinstance(model_path, (str, Path)):
            raise InputError("model_path must be a scene name or a URDF / MJCF path (str or Path), got "
                             f"{type(model_path).__name__}")
        super().__init__(str(model_path), **kwargs)
        root_joint = (pin.JointModelFreeFlyer() if kwargs.get("free_flyer", False) or kwargs.get("isFext", False)
                      else None)
        try:
            model = _build(pin, model_path, root_joint, kwargs.get("package_dirs"))
            data = model.createData()
        except Exception as err:  # Pinocchio raises RuntimeError, ValueError, IndexError, ... on bad files
            raise ModelLoadError(f"Failed to load model '{model_path}' with Pinocchio: {err}\n"
                                 "Ensure the file is a valid URDF or MJCF.") from err  # fmt: skip
        if not kwargs.get("include_armature", False):
            model.armature[:] = 0.0
        self.model, self.data = model, data
        self._format = "urdf" if str(model_path).endswith(".urdf") else "mjcf"
        self._verbose = bool(kwargs.get("verbose", False))
        if self._verbose:
            print(f"Pinocchio model loaded: {model.nq} positions, {model.nv} velocities")

    @classmethod
    def from_model(cls, model, data=None, **kwargs) -> PinocchioBackend:
        """Wrap an existing ``pin.Model`` (and ``pin.Data``, created when None) without reloading it.

        Raises:
            ImportError: if Pinocchio is not installed.
        """
        pin = import_pinocchio()
        _check_options(kwargs)
        if not isinstance(model, pin.Model) or (data is not None and not isinstance(data, pin.Data)):
            raise InputError(f"model must be a pinocchio.Model and data a pinocchio.Data or None, got "
                             f"{type(model).__name__}, {type(data).__name__}")  # fmt: skip
        backend = cls.__new__(cls)
        DynamicsBackend.__init__(backend, None, **kwargs)
        backend.model, backend.data = model, data if data is not None else model.createData()
        backend._format = "urdf"
        backend._verbose = bool(kwargs.get("verbose", False))
        return backend

    nq = property(lambda self: self.model.nq, doc="Number of position variables.")
    nv = property(lambda self: self.model.nv, doc="Number of velocity variables.")
    model_format = property(lambda self: self._format, doc="'urdf' or 'mjcf'; 'urdf' for a wrapped model.")

    @property
    def parameters(self) -> np.ndarray:
        """Stacked dynamic parameters θ (10 njoints,) of the bodies after the universe: the regressor's columns."""
        return np.concatenate([inertia.toDynamicParameters() for inertia in self.model.inertias[1:]])

    def _vec(self, x, name: str, size: int) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        if x.shape != (size,):
            raise InputError(f"{name} must have shape ({size},), got {x.shape}")
        return x

    def _q(self, q, name: str = "q") -> np.ndarray:
        return self._vec(q, name, self.nq)

    def _v(self, v, name: str = "v") -> np.ndarray:
        return self._vec(v, name, self.nv)

    def compute_mass_matrix(self, q) -> np.ndarray:
        """M(q) by CRBA, (nv, nv), symmetric (Pinocchio fills the upper triangle)."""
        upper = np.triu(import_pinocchio().crba(self.model, self.data, self._q(q)))
        return upper + np.triu(upper, 1).T

    def compute_coriolis_matrix(self, q, v) -> np.ndarray:
        """C(q, v) by ``computeCoriolisMatrix``, (nv, nv)."""
        return import_pinocchio().computeCoriolisMatrix(self.model, self.data, self._q(q), self._v(v)).copy()

    def compute_gravity_vector(self, q) -> np.ndarray:
        """g(q) by ``computeGeneralizedGravity``, (nv,)."""
        return import_pinocchio().computeGeneralizedGravity(self.model, self.data, self._q(q)).copy()

    def compute_bias(self, q, v) -> np.ndarray:
        """C(q, v) v + g(q) by ``nonLinearEffects``, (nv,)."""
        return import_pinocchio().nonLinearEffects(self.model, self.data, self._q(q), self._v(v)).copy()

    def compute_inverse_dynamics(self, q, v, a) -> np.ndarray:
        """tau by RNEA, (nv,)."""
        return import_pinocchio().rnea(self.model, self.data, self._q(q), self._v(v), self._v(a, "a")).copy()

    def compute_forward_dynamics(self, q, v, tau) -> np.ndarray:
        """a by ABA, (nv,)."""
        return import_pinocchio().aba(self.model, self.data, self._q(q), self._v(v), self._v(tau, "tau")).copy()

    def compute_regressor(self, q, v, a) -> np.ndarray:
        """W by ``computeJointTorqueRegressor``, (nv, 10 njoints): all 10 parameters of every body."""
        w = import_pinocchio().computeJointTorqueRegressor(self.model, self.data, self._q(q), self._v(v),
                                                           self._v(a, "a"))
        return np.asarray(w).reshape(self.nv, -1).copy()

    def compute_forward_kinematics(self, q) -> dict[str, dict[str, np.ndarray]]:
        """Every frame but the universe: position (3,), orientation (3, 3), quaternion (4,) (w, x, y, z;
        w >= 0), transformation (4, 4). A name shared by several frames maps to the first of them."""
        pin = import_pinocchio()
        pin.forwardKinematics(self.model, self.data, self._q(q))
        pin.updateFramePlacements(self.model, self.data)
        out = {}
        for frame, placement in zip(self.model.frames[1:], self.data.oMf[1:]):
            if frame.name not in out:
                rot = placement.rotation.copy()
                out[frame.name] = {"position": placement.translation.copy(), "orientation": rot,
                                   "quaternion": R.mat_to_quat_np(rot),
                                   "transformation": placement.homogeneous.copy()}  # fmt: skip
        return out

    def compute_jacobian(self, q, frame: str) -> np.ndarray:
        """Frame Jacobian in the LOCAL frame (as FIGAROH's ``DynamicsBackend``), (6, nv), [linear; angular]."""
        pin = import_pinocchio()
        jac = pin.computeFrameJacobian(self.model, self.data, self._q(q), self.get_frame_id(frame), pin.LOCAL)
        return np.asarray(jac).reshape(6, self.nv).copy()

    def get_joint_names(self) -> list[str]:
        """Joint names, the universe skipped."""
        return list(self.model.names[1:])

    def get_frame_names(self) -> list[str]:
        """Frame names (joints, bodies, sites), the universe skipped."""
        return [frame.name for frame in self.model.frames[1:]]

    def get_inertias(self) -> list:
        """``pin.Inertia`` of every joint's body, the universe (index 0) first."""
        return list(self.model.inertias)

    def get_frame_id(self, frame: str) -> int:
        """Id of the first frame named ``frame`` (Pinocchio's ``getFrameId`` refuses a name that a joint
        and a body share, e.g. the SO-101's "gripper"); ValueError listing the frames otherwise."""
        names = [f.name for f in self.model.frames]
        if frame not in names:
            raise InputError(f"Frame {frame!r} not found in model. Available frames: {self.get_frame_names()}")
        return names.index(frame)

    def compute_difference(self, q1, q2) -> np.ndarray:
        """``q2 ⊖ q1``, (nv,): subtraction for hinges, the SE(3) log of ``M1⁻¹ M2`` for a free-flyer."""
        return import_pinocchio().difference(self.model, self._q(q1, "q1"), self._q(q2, "q2"))

    def compute_integrate(self, q, v) -> np.ndarray:
        """``q ⊕ v``, (nq,): addition for hinges, ``M exp(v)`` for a free-flyer."""
        return import_pinocchio().integrate(self.model, self._q(q), self._v(v))

    def random_configuration(self) -> np.ndarray:
        """A uniform configuration within the position limits, (nq,). A free-flyer's translation is
        unbounded: give it finite limits in ``get_model_object()`` first (ValueError otherwise)."""
        q = import_pinocchio().randomConfiguration(self.model)
        if not np.isfinite(q).all():
            raise InputError("random_configuration needs finite position limits; set lowerPositionLimit / "
                             "upperPositionLimit of the free-flyer's translation (q[:3]) in "
                             "get_model_object()")  # fmt: skip
        return q

    def get_model_object(self) -> Any:
        """The ``pin.Model``."""
        return self.model
