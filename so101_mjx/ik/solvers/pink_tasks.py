"""``NullSpacePostureTask``: a Pink task holding a joint posture in the null space of frame tasks
(the EmbodiChain solver interface's Pink solver: null-space posture targets).

Error ``e = M (q ⊖ q*)`` (``M`` selects ``controlled_joints``, all by default); Jacobian
``M N M`` with ``N = I − J⁺J``, ``J`` the stacked Jacobians of ``controlled_frames`` (none: ``N = I``),
so the posture only moves the joints where it does not disturb those frames. A 5-DoF arm has no
null space left under a frame's full 6-row Jacobian; with ``position_only`` only the frames'
position rows are projected out (the two free directions of a position-only frame task).

Importing this module needs the ``pink`` extra (``pip install "so101-mjx[pink]"``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from so101_mjx.errors import InputError
from so101_mjx.ik.solvers.pinocchio_solver import import_optional

pin = import_optional("pinocchio", "pink", "NullSpacePostureTask")
_tasks = import_optional("pink.tasks", "pink", "NullSpacePostureTask")
_Task: Any = _tasks.Task  # a base class from a module imported at run time (an optional extra)


class NullSpacePostureTask(_Task):
    """Posture task projected into the null space of ``controlled_frames``' Jacobians.

    Args:
        cost: weight of the task in the QP (per radian).
        lm_damping: Levenberg–Marquardt damping of the task (unitless).
        gain: low-pass gain in [0, 1] (1: no filtering).
        controlled_frames: frames whose Jacobians the posture must not disturb (None: no projection).
        controlled_joints: joints the posture acts on (None: all).
        position_only: project out only the frames' position rows (an addition to the interface's task).
    """

    def __init__(self, cost: float, lm_damping: float = 0.0, gain: float = 1.0,
                 controlled_frames: list[str] | None = None, controlled_joints: list[str] | None = None,
                 position_only: bool = False) -> None:
        super().__init__(cost=cost, gain=gain, lm_damping=lm_damping)
        self.target_q: np.ndarray | None = None
        self.controlled_frames = list(controlled_frames or [])
        self.controlled_joints = list(controlled_joints or [])
        self.position_only = bool(position_only)
        self._mask: np.ndarray | None = None
        self._model = None

    def __repr__(self) -> str:
        return (f"NullSpacePostureTask(cost={self.cost}, gain={self.gain}, lm_damping={self.lm_damping}, "
                f"controlled_frames={self.controlled_frames}, controlled_joints={self.controlled_joints})")

    def _map(self, model) -> None:
        """The velocity mask of ``controlled_joints`` on ``model``; InputError for unknown names."""
        names = [model.names[j] for j in range(1, model.njoints)]
        unknown = set(self.controlled_joints) - set(names)
        frames = {f.name for f in model.frames}
        unknown_frames = set(self.controlled_frames) - frames
        if unknown or unknown_frames:
            raise InputError(f"NullSpacePostureTask: unknown controlled_joints {sorted(unknown)} / "
                             f"controlled_frames {sorted(unknown_frames)}")
        selected = set(self.controlled_joints) or set(names)
        self._mask = np.zeros(model.nv)
        for j in range(1, model.njoints):
            if model.names[j] in selected:
                self._mask[model.joints[j].idx_v:model.joints[j].idx_v + model.joints[j].nv] = 1.0
        self._model = model

    def set_target(self, target_q) -> None:
        """Set the posture ``target_q`` (nq,) (the model's joint order)."""
        target = np.asarray(target_q, dtype=np.float64)
        if target.ndim != 1 or not np.all(np.isfinite(target)):
            raise InputError(f"target_q must be a finite 1-D array, got {target_q!r}")
        self.target_q = target.copy()

    def set_target_from_configuration(self, configuration) -> None:
        """Set the posture target to ``configuration.q``."""
        self.set_target(configuration.q)

    def compute_error(self, configuration) -> np.ndarray:
        """``M (q ⊖ q*)`` (nv,); InputError before a target is set or for a target of the wrong size."""
        if self.target_q is None or self.target_q.shape != (configuration.model.nq,):
            raise InputError(f"NullSpacePostureTask: set a posture target of shape ({configuration.model.nq},) first")
        if self._model is not configuration.model:
            self._map(configuration.model)
        return self._mask * pin.difference(configuration.model, self.target_q, configuration.q)

    def compute_jacobian(self, configuration) -> np.ndarray:
        """``M N M`` (nv, nv), ``N = I − J⁺J`` of the controlled frames' stacked Jacobians."""
        if self._model is not configuration.model:
            self._map(configuration.model)
        nv = configuration.model.nv
        projector = np.eye(nv)
        if self.controlled_frames:
            rows = slice(0, 3) if self.position_only else slice(None)
            jac = np.concatenate([configuration.get_frame_jacobian(f)[rows] for f in self.controlled_frames], 0)
            projector = projector - np.linalg.pinv(jac) @ jac
        assert self._mask is not None  # set by _map with _model
        return self._mask[:, None] * projector * self._mask[None, :]
