"""``SolverCfg``: the solver interface's configuration objects (the EmbodiChain solver interface's ``SolverCfg``).

A concrete config subclasses :class:`SolverCfg` as a dataclass, sets ``class_type`` to its solver's
class name and ``solver_class`` (a ``ClassVar``) to the runtime class; :meth:`SolverCfg.init_solver`
then builds ``solver_class(cfg, device=device, **kwargs)``. :meth:`SolverCfg.from_dict` picks the
concrete config by ``class_type`` among the subclasses imported so far.

Field values are checked at construction (``__post_init__``), each bad one an
:class:`~so101_mjx.errors.InputError` naming the field; the fields stay assignable, as EmbodiChain's,
and the solver checks them again when it is built.
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from so101_mjx.errors import InputError
from so101_mjx.robot.scenes import EE_SITE

_SE3_ATOL = 1e-6  # |RᵀR − I|, |det R − 1| and last-row tolerance of a TCP transform
_DEVICE_ALIASES = {"cuda": "gpu", "rocm": "gpu"}


def check_tcp(value, name: str = "tcp") -> np.ndarray:
    """``value`` as a (4, 4) float64 SE(3) transform; InputError naming ``name`` otherwise."""
    try:
        t = np.array(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise InputError(f"{name} must be a finite (4, 4) SE(3) transform, got {value!r}") from None
    ok = t.shape == (4, 4) and bool(np.all(np.isfinite(t)))
    if ok:
        rot = t[:3, :3]
        ok = bool(np.all(np.abs(rot.T @ rot - np.eye(3)) <= _SE3_ATOL) and abs(np.linalg.det(rot) - 1) <= _SE3_ATOL
                  and np.all(np.abs(t[3] - [0, 0, 0, 1]) <= _SE3_ATOL))
    if not ok:
        raise InputError(f"{name} must be a finite (4, 4) SE(3) transform (orthonormal rotation, det +1, last row "
                         f"[0, 0, 0, 1]), got shape {t.shape}: {t.tolist() if t.size <= 16 else '...'}")
    return t


def resolve_device(device=None):
    """A JAX device: None = JAX's default device; a ``jax.Device`` as is; a platform string such as
    ``"cpu"``, ``"gpu"``, ``"cuda"`` or ``"cuda:1"`` (``"cuda"``/``"rocm"`` = ``"gpu"``; the index defaults to 0)."""
    import jax

    if device is None:
        return jax.devices()[0]
    if isinstance(device, jax.Device):
        return device
    if not isinstance(device, str):
        raise InputError("device must be None, a jax.Device or a platform string like 'cpu' or 'cuda:0', "
                         f"got {device!r}")
    platform, _, index = device.strip().lower().partition(":")
    platform = _DEVICE_ALIASES.get(platform, platform)
    try:
        devices = jax.devices(platform)
    except RuntimeError:
        raise InputError(f"device {device!r}: JAX has no {platform!r} platform here; "
                         f"available: {sorted({d.platform for d in jax.devices()} | {'cpu'})}") from None
    if index and not (index.isdigit() and int(index) < len(devices)):
        raise InputError(f"device {device!r}: index must be an integer in [0, {len(devices)}) for {platform!r}")
    return devices[int(index or 0)]


def _names(value, name: str) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str) or not all(isinstance(v, str) for v in value) or len(value) == 0:
        raise InputError(f"{name} must be None or a non-empty list of names, got {value!r}")
    return list(value)


def _joint_names(value, name: str) -> list[str]:
    """A control part's joint names: a non-empty list of names (None is refused, naming ``name``)."""
    names = _names(value, name)
    if names is None:
        raise InputError(f"{name} must be a non-empty list of names, got None")
    return names


def _text(value, name: str) -> str:
    if not isinstance(value, str) or not value:
        raise InputError(f"{name} must be a non-empty string, got {value!r}")
    return value


def _weights(value) -> list[float] | None:
    if value is None:
        return None
    w = np.asarray(value, dtype=np.float64) if not isinstance(value, str) else np.full(0, np.nan)
    if w.ndim != 1 or w.size == 0 or not np.all(np.isfinite(w)) or np.any(w < 0):
        raise InputError(f"ik_nearest_weight must be None or a list of finite non-negative weights, got {value!r}")
    return w.tolist()


def _limits(value) -> list[list[float]] | None:
    if value is None:
        return None
    lim = np.asarray(value, dtype=np.float64) if not isinstance(value, str) else np.full(0, np.nan)
    if lim.ndim != 2 or lim.shape[0] != 2 or np.any(np.isnan(lim)) or np.any(lim[0] > lim[1]):
        raise InputError("user_qpos_limits must be None or [lower (DOF,), upper (DOF,)] with lower <= upper, "
                         f"got {value!r}")
    return lim.tolist()


@dataclass
class SolverCfg:
    """Common configuration of the IK solvers (the EmbodiChain solver interface's ``SolverCfg``).

    Attributes:
        class_type: name of the solver class the config builds (a subclass sets it).
        urdf_path: robot model file: a URDF (loaded through MuJoCo's URDF import) or an MJCF; None =
            the library's SO-101 model.
        joint_names: solved joints in order; None = every hinge on the chain from the root to the end link.
        end_link_name: the end link (a site, or a link/body, of the model); FK/IK act on its frame.
        root_link_name: the chain's root link; its frame is the frame of FK results and IK targets.
        tcp: (4, 4) SE(3) tool centre point in the end link's frame.
        ik_nearest_weight: per-joint weights of nearest-solution selection; None = all ones.
        user_qpos_limits: [lower (DOF,), upper (DOF,)] radians, intersected with the model's limits; None = the model's.
    """

    solver_class: ClassVar[type | None] = None

    class_type: str = ""
    urdf_path: str | None = None
    joint_names: list[str] | None = None
    end_link_name: str = EE_SITE
    root_link_name: str = "base"
    tcp: np.ndarray = field(default_factory=lambda: np.eye(4))
    ik_nearest_weight: list[float] | None = None
    user_qpos_limits: list[list[float]] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.class_type, str):
            raise InputError(f"class_type must be a string (a solver class name), got {self.class_type!r}")
        if self.urdf_path is not None:
            if not isinstance(self.urdf_path, (str, os.PathLike)):
                raise InputError(f"urdf_path must be None or a path, got {self.urdf_path!r}")
            self.urdf_path = os.fspath(self.urdf_path)
        self.joint_names = _names(self.joint_names, "joint_names")
        self.end_link_name = _text(self.end_link_name, "end_link_name")
        self.root_link_name = _text(self.root_link_name, "root_link_name")
        self.tcp = check_tcp(self.tcp)
        self.ik_nearest_weight = _weights(self.ik_nearest_weight)
        self.user_qpos_limits = _limits(self.user_qpos_limits)

    @classmethod
    def from_dict(cls, init_dict: Mapping[str, Any]) -> SolverCfg:
        """The concrete config of ``init_dict["class_type"]`` (default: ``cls``), built from the dict.

        Dataclass fields go to the constructor (so ``__post_init__`` sees the final inputs once);
        other public attributes the class defines are set afterwards; unknown keys are ignored
        with a warning. InputError for a ``class_type`` no imported config builds.
        """
        if not isinstance(init_dict, Mapping):
            raise InputError(f"init_dict must be a mapping of config fields, got {type(init_dict).__name__}")
        target = cls._config_class(init_dict["class_type"]) if "class_type" in init_dict else cls
        init = {f.name for f in dataclasses.fields(target) if f.init}
        kwargs, later = {}, {}
        for key, value in init_dict.items():
            if key in init:
                kwargs[key] = value
            elif _is_plain_attribute(target, key):
                later[key] = value
            else:
                warnings.warn(f"{target.__name__}.from_dict: unknown field {key!r} ignored", stacklevel=2)
        cfg = target(**kwargs)
        for key, value in later.items():
            setattr(cfg, key, value)
        return cfg

    @classmethod
    def _config_class(cls, class_type) -> type[SolverCfg]:
        """The subclass of ``cls`` (``cls`` included) whose own ``class_type`` default is ``class_type``."""
        found = {c.__dict__["class_type"]: c for c in _subclasses(cls) if isinstance(c.__dict__.get("class_type"), str)}
        if class_type not in found or not class_type:
            raise InputError(f"class_type must be one of {sorted(k for k in found if k)} (configs of "
                             f"{cls.__name__} imported so far), got {class_type!r}")
        return found[class_type]

    def init_solver(self, device=None, **kwargs):
        """Build the runtime solver: ``solver_class(self, device=device, **kwargs)``.

        ``device``: a JAX device or platform string; None = the CPU, EmbodiChain's default here.
        """
        if self.solver_class is None:
            raise InputError(f"{type(self).__name__} builds no solver: use a concrete config (class_type set)")
        return self.solver_class(self, device="cpu" if device is None else device, **kwargs)


def _subclasses(cls: type) -> list[type]:
    out = [cls]
    sub: type
    for sub in cls.__subclasses__():
        out.extend(_subclasses(sub))
    return out


def _is_plain_attribute(cls: type, key: str) -> bool:
    """``key`` is a public, non-callable class attribute other than ``solver_class`` (a legacy config attribute)."""
    if key.startswith("_") or key == "solver_class" or not hasattr(cls, key):
        return False
    value = getattr(cls, key)
    return not (callable(value) or isinstance(getattr(type(cls), key, None), property)
                or any(isinstance(c.__dict__.get(key), property) for c in cls.__mro__))


@dataclass
class RobotCfg:
    """A robot's solver configs, one per control part (the EmbodiChain solver interface: the solvers ``init_solver``
    builds "inside RobotCfg"; "a robot may carry one solver per control part").

    Attributes:
        solver_cfg: {control part: :class:`SolverCfg`}; a part's value may also be a dict (built with
            :meth:`SolverCfg.from_dict`), and a single config is the part ``"arm"``.
        control_parts: optional {control part: joint names}; each solver's part must be one, and a
            config without ``joint_names`` solves its part's joints.
    """

    solver_cfg: dict[str, SolverCfg] = field(default_factory=dict)
    control_parts: dict[str, list[str]] | None = None

    def __post_init__(self) -> None:
        cfgs = {"arm": self.solver_cfg} if isinstance(self.solver_cfg, (SolverCfg, str)) else self.solver_cfg
        if not isinstance(cfgs, Mapping) or not all(isinstance(k, str) and k for k in cfgs):
            raise InputError(f"solver_cfg must be a SolverCfg or a dict {{control part name: SolverCfg}}, got "
                             f"{self.solver_cfg!r}")
        self.solver_cfg = {part: _part_cfg(part, c) for part, c in cfgs.items()}
        if self.control_parts is not None:
            if not isinstance(self.control_parts, Mapping):
                raise InputError(f"control_parts must be None or a dict {{part: joint names}}, got "
                                 f"{self.control_parts!r}")
            self.control_parts = {str(p): _joint_names(j, f"control_parts[{p!r}]")
                                  for p, j in self.control_parts.items()}
            unknown = sorted(set(self.solver_cfg) - set(self.control_parts))
            if unknown:
                raise InputError(f"solver_cfg parts {unknown} are not control parts; control_parts: "
                                 f"{sorted(self.control_parts)}")

    @classmethod
    def from_dict(cls, init_dict: Mapping[str, Any]) -> RobotCfg:
        """A RobotCfg from ``{"solver_cfg": {part: config dict or SolverCfg}, "control_parts": ...}``."""
        if not isinstance(init_dict, Mapping):
            raise InputError(f"init_dict must be a mapping of RobotCfg fields, got {type(init_dict).__name__}")
        unknown = sorted(set(init_dict) - {"solver_cfg", "control_parts"})
        if unknown:
            raise InputError(f"RobotCfg.from_dict: unknown fields {unknown}; allowed: ['control_parts', 'solver_cfg']")
        return cls(**init_dict)

    def part_cfg(self, part: str) -> SolverCfg:
        """The solver config of ``part``, its ``joint_names`` taken from ``control_parts`` when unset."""
        if part not in self.solver_cfg:
            raise InputError(f"part must be one of {sorted(self.solver_cfg)}, got {part!r}")
        cfg = self.solver_cfg[part]
        if self.control_parts is not None and cfg.joint_names is None:
            cfg = dataclasses.replace(cfg, joint_names=list(self.control_parts[part]))
        return cfg

    def init_solver(self, device=None, **kwargs) -> dict[str, Any]:
        """{control part: solver}, each built by its config's :meth:`SolverCfg.init_solver` (``device``, ``kwargs``)."""
        return {part: self.part_cfg(part).init_solver(device=device, **kwargs) for part in self.solver_cfg}


def _part_cfg(part: str, cfg) -> SolverCfg:
    if isinstance(cfg, Mapping):
        cfg = SolverCfg.from_dict(cfg)
    if not isinstance(cfg, SolverCfg):
        raise InputError(f"solver_cfg[{part!r}] must be a SolverCfg or a config dict, got {type(cfg).__name__}")
    return cfg
