"""A pixel student that acts through its teacher: it estimates the teacher's privileged state and the frozen teacher
maps the follower's motor positions and that estimate to the action.

A state teacher observes ``agent_pos`` (what a follower measures) and a privileged rest (in PickCube the block's
position, m); a camera student cannot observe the rest, so it estimates it from its frames. The student's head
outputs that rest standardized (:attr:`Estimator.state_size` entries); the action is the teacher's on
``concat(agent_pos, estimate · estimate_std + estimate_mean)``. Distilling (``so101-mjx distill --student
estimator``) regresses the estimate on the true state of every visited frame: a target of a few numbers with a
meaning in metres, in place of the teacher's whole action (Chen et al., 2019, "Learning by Cheating"; Kumar et al.,
2021, RMA, whose adaptation module regresses a privileged latent for a frozen base policy).

The teacher's arrays are the student's ``teacher`` variable collection (saved as ``teacher/<name>`` in
``student.npz``, ONNX initializers ``teacher_<name>``): the teacher's observation normalizer ``obs_mean`` /
``obs_std``, its layers ``kernel_<i>`` / ``bias_<i>``, its action map ``action_scale`` / ``action_offset``, and the
estimate's ``estimate_mean`` / ``estimate_std``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from so101_mjx import _schema as schema
from so101_mjx.errors import InputError
from so101_mjx.training.policy import ACTIVATIONS, PolicyWeights, forward

MAX_LAYERS, MAX_WIDTH = 16, 4096  # a teacher MLP's depth and width a student's metadata may declare (a header check)
COLLECTION = "teacher"  # the flax variable collection; its arrays flattened as "teacher/<name>"


def split(params: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(the student's own params, the teacher arrays by name)`` of params flattened by '/'-joined path."""
    prefix = COLLECTION + "/"
    return ({k: v for k, v in params.items() if not k.startswith(prefix)},
            {k[len(prefix):]: v for k, v in params.items() if k.startswith(prefix)})


@dataclasses.dataclass(frozen=True)
class Estimator:
    """The shape of an estimating student's teacher: ``state_size`` privileged entries estimated, the teacher MLP's
    widths ``layers`` (agent_pos + state_size in, its hidden layers, 2 × actions out) and its ``activation``."""

    state_size: int
    layers: tuple[int, ...]
    activation: str

    def __post_init__(self) -> None:
        if not (isinstance(self.state_size, int) and 0 < self.state_size < MAX_WIDTH):
            raise InputError(f"estimator.state_size must be an integer in 1..{MAX_WIDTH - 1}, got {self.state_size!r}")
        if not (2 <= len(self.layers) <= MAX_LAYERS and all(isinstance(w, int) and 0 < w <= MAX_WIDTH
                                                           for w in self.layers) and self.layers[-1] % 2 == 0):
            raise InputError(f"estimator.layers must be 2 to {MAX_LAYERS} widths in 1..{MAX_WIDTH}, the last even "
                             f"(2 x actions), got {self.layers!r}")
        if self.activation not in ACTIVATIONS:
            raise InputError(f"estimator.activation must be one of {sorted(ACTIVATIONS)}, got {self.activation!r}")

    @classmethod
    def of(cls, value: Any, source: str) -> Estimator:
        """From its JSON form (``{"state_size", "layers", "activation"}``); InputError naming ``source``."""
        schema.fields(source, value, {"state_size": schema.integer(1), "layers": schema.list_of(schema.integer(1)),
                                      "activation": schema.STRING}, where="estimator.")
        try:
            return cls(value["state_size"], tuple(value["layers"]), value["activation"])
        except InputError as err:
            raise InputError(f"{source}: {err}") from None

    @classmethod
    def of_teacher(cls, weights: PolicyWeights, agent_pos: int) -> Estimator:
        """The estimator of a state teacher whose observation is ``agent_pos`` entries, then the privileged rest."""
        if weights.obs_size <= agent_pos:
            raise InputError(f"the teacher observes {weights.obs_size} entries, no privileged state after the "
                             f"{agent_pos} of agent_pos: nothing to estimate")
        return cls(weights.obs_size - agent_pos, (weights.obs_size, *(int(k.shape[1]) for k in weights.kernels)),
                   weights.activation)

    def as_json(self) -> dict[str, Any]:
        return {"state_size": self.state_size, "layers": list(self.layers), "activation": self.activation}

    @property
    def actions(self) -> int:
        return self.layers[-1] // 2

    def shapes(self) -> dict[str, tuple[int, ...]]:
        """The teacher collection's arrays (name -> shape)."""
        obs, actions = self.layers[0], self.actions
        layers = {f"{kind}_{i}": (w_in, w_out) if kind == "kernel" else (w_out,)
                  for i, (w_in, w_out) in enumerate(zip(self.layers, self.layers[1:])) for kind in ("kernel", "bias")}
        return {"obs_mean": (obs,), "obs_std": (obs,), **layers, "action_scale": (actions,),
                "action_offset": (actions,), "estimate_mean": (self.state_size,), "estimate_std": (self.state_size,)}


def teacher_arrays(weights: PolicyWeights, action_scale: np.ndarray, action_offset: np.ndarray,
                   estimate_mean: np.ndarray, estimate_std: np.ndarray) -> dict[str, np.ndarray]:
    """The teacher collection (float32) of a teacher's weights and action map, and the estimate's standardization."""
    layers = {f"obs_{name}" if name in ("mean", "std") else name: value for name, value in weights.arrays().items()}
    arrays = {**layers, "action_scale": action_scale, "action_offset": action_offset,
              "estimate_mean": estimate_mean, "estimate_std": estimate_std}
    return {name: np.asarray(value, np.float32) for name, value in arrays.items()}


def variables(module: Any, estimator: Estimator) -> dict[str, Any]:
    """The teacher collection's values within flax ``module`` (created at init: ones for the standard deviations,
    zeros for the rest, until the teacher's arrays replace them)."""
    import jax.numpy as jnp

    return {name: module.variable(COLLECTION, name, jnp.ones if name.endswith("std") else jnp.zeros, shape).value
            for name, shape in estimator.shapes().items()}


def teacher_weights(arrays: dict[str, Any], estimator: Estimator) -> PolicyWeights:
    """The teacher's :class:`PolicyWeights` within a teacher collection (numpy or JAX arrays)."""
    n = len(estimator.layers) - 1
    return PolicyWeights(arrays["obs_mean"], arrays["obs_std"], tuple(arrays[f"kernel_{i}"] for i in range(n)),
                         tuple(arrays[f"bias_{i}"] for i in range(n)), estimator.activation)


def act(arrays: dict[str, Any], estimator: Estimator, agent_pos: Any, estimate: Any, xp: Any = np) -> Any:
    """The teacher's action ``(..., actions)`` on ``agent_pos`` (..., P) and the standardized ``estimate``
    (..., state_size), in array module ``xp``."""
    state = estimate * arrays["estimate_std"] + arrays["estimate_mean"]
    obs = xp.concatenate([agent_pos.astype(state.dtype), state], axis=-1)
    return forward(teacher_weights(arrays, estimator), obs, arrays["action_scale"], arrays["action_offset"], xp)


def check(arrays: dict[str, np.ndarray], estimator: Estimator, source: str) -> None:
    """InputError naming ``source`` and the array unless ``arrays`` is the teacher collection ``estimator``
    describes: every array, their shapes, finite float32, positive standard deviations."""
    shapes = estimator.shapes()
    if set(arrays) != set(shapes):
        raise InputError(f"{source}: the teacher arrays must be {sorted(shapes)}, got {sorted(arrays)}")
    for name, shape in shapes.items():
        value = schema.array(source, f"teacher/{name}", arrays[name], dtype="float32")
        if value.shape != shape:
            raise InputError(f"{source}: teacher/{name} has shape {value.shape}, expected {shape} (estimator "
                             f"{estimator.as_json()})")
    for name in ("obs_std", "estimate_std"):
        if not np.all(arrays[name] > 0):
            raise InputError(f"{source}: teacher/{name} must be positive")


def graph_nodes(arrays: dict[str, np.ndarray], estimator: Estimator, agent_pos: str, head: str, builders) -> None:
    """The ONNX nodes from the student's ``head`` (the standardized estimate) and ``agent_pos`` (float) graph values
    through ``actions``, their names prefixed ``teacher_``: builders ``(const, node)`` of
    :func:`~so101_mjx.training.export.graph_builders` with that prefix."""
    from so101_mjx.training.export import policy_nodes

    const, node = builders
    state = node("Add", [node("Mul", [head, const("estimate_std", arrays["estimate_std"])], "estimate_scaled"),
                         const("estimate_mean", arrays["estimate_mean"])], "estimate")
    obs = node("Concat", [agent_pos, state], "obs", axis=1)
    policy_nodes(teacher_weights(arrays, estimator), obs, arrays["action_scale"], arrays["action_offset"], builders)
