"""The env state contract: :class:`State` (what ``reset``/``step`` return) and :class:`Info`.

Every env carries the same :class:`Info` fields; a task's own bookkeeping (block height at reset,
goal, target, ...) lives in ``Info.task``, one dict. Both are pytrees (``flax.struct``), so
they pass through ``jit``, ``vmap``, ``lax.scan`` and ``lax.cond``; with leading batch axes when
vmapped. ``info[key]`` reads a field or a task entry by name (what Brax-style code expects);
code in this library uses the attributes.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Self

from flax import struct
from jax import Array

from so101_mjx.sim.physics import PhysicsState


@struct.dataclass
class Info:
    """Per-world bookkeeping every env carries (shapes of one world)."""

    if TYPE_CHECKING:  # flax.struct.dataclass adds it at runtime

        def replace(self, **changes: Any) -> Self: ...

    rng: Array  # (2,) uint32: key of this world's next auto-reset
    succeed: Array  # () bool: the task's success at the last step
    ik_target: Array  # (3,) m: where the Cartesian controller is steering the IK point
    last_action_zero: Array  # () bool: the last action's delta was (near) zero
    # () int32: actions with a NaN/inf component so far this episode (+ reset_to values replaced in jit)
    nonfinite_actions: Array
    task: dict[str, Array]  # the task's own entries
    model_params: dict[str, Array] | None = None  # this episode's randomized model arrays
    # this episode's visual randomization (so101_mjx.render.visual_randomization)
    render_params: dict[str, Array] | None = None
    # camera -> (latency, H, W, 3) uint8 frames not yet observed (render.latency)
    frames: dict[str, Array] | None = None
    servo: dict[str, Array] | None = None  # the servo model's state (so101_mjx.sim.servo), when it is on
    steps: Array | None = None  # () int32: control steps this episode (set by the training wrapper)
    truncation: Array | None = None  # () float 0/1: the episode hit its length limit (training wrapper)

    def __getitem__(self, key: str) -> Any:
        """A field (when set) or a task entry by name; KeyError otherwise."""
        if key in _FIELDS:
            value = getattr(self, key)
            if value is not None:
                return value
        elif key in self.task:
            return self.task[key]
        raise KeyError(key)

    def __contains__(self, key: str) -> bool:
        return (key in _FIELDS and getattr(self, key) is not None) or (key not in _FIELDS and key in self.task)


_FIELDS = frozenset(f.name for f in dataclasses.fields(Info)) - {"task"}


@struct.dataclass
class State:
    """One world's env state (leading batch axes when vmapped)."""

    if TYPE_CHECKING:  # flax.struct.dataclass adds it at runtime

        def replace(self, **changes: Any) -> Self: ...

    physics: PhysicsState
    obs: Array | dict[str, Array]  # (obs_size,) flat: agent_pos (14) then environment_state; a dict with image_obs
    reward: Array  # () sum of the task's scaled reward terms
    done: Array  # () float 0/1: terminated
    metrics: dict[str, Array]  # success, reward/<term>, nonfinite_actions, task metrics
    info: Info
