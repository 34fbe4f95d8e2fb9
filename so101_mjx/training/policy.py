"""The deterministic policy as numpy arrays, its checks, and its numpy runner (numpy only: no JAX needed).

The action is ``tanh(loc) · action_scale + action_offset`` (:func:`so101_mjx.training.brax_env.to_env_action`),
``loc`` being the first half of the policy MLP's output on ``(obs − mean) / std``.
:class:`PolicyWeights` holds the normalizer and dense layers; the ONNX graph
(:mod:`so101_mjx.training.export`), :class:`NumpyPolicy` and the jitted policy of ``so101-mjx eval``
(:mod:`so101_mjx.training.evaluate`, :func:`forward` with ``jax.numpy``) are built from it.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np

from so101_mjx import _schema as schema
from so101_mjx._files import atomic_path
from so101_mjx.errors import InputError
from so101_mjx.training import npz

# Activations over an array module ``xp`` (numpy or jax.numpy); names as brax.training.networks.ACTIVATION.
ACTIVATIONS = {
    "relu": lambda xp, x: xp.maximum(x, 0.0),
    "tanh": lambda xp, x: xp.tanh(x),
    "swish": lambda xp, x: x / (1.0 + xp.exp(-x)),
    "silu": lambda xp, x: x / (1.0 + xp.exp(-x)),
}
# ``network`` of the run metadata: what rebuilds the MLPs (the activation by Brax's name)
TEXT_ARRAYS = ("metadata", "activation")  # the policy .npz's strings (0-d unicode arrays)
MAX_TEXT_BYTES = 2**22  # bytes of either string: metadata is a few kB of JSON
MAX_UNLISTED_WIDTH, MAX_UNLISTED_LAYERS = 4096, 16  # bounds of a network whose metadata lists no hidden layer sizes
NETWORK = {"activation": schema.STRING, "policy_hidden_layer_sizes": schema.list_of(schema.integer(1)),
           "value_hidden_layer_sizes": schema.list_of(schema.integer(1))}


@dataclasses.dataclass(frozen=True)
class PolicyWeights:
    """Deterministic policy: normalizer (identity when not normalizing) and dense layers, float32."""

    mean: np.ndarray  # (obs_size,)
    std: np.ndarray  # (obs_size,)
    kernels: tuple[np.ndarray, ...]  # (in, out) each; the last has out = 2 * action_size
    biases: tuple[np.ndarray, ...]
    activation: str

    @property
    def obs_size(self) -> int:
        return int(self.mean.shape[0])

    @property
    def action_size(self) -> int:
        return int(self.kernels[-1].shape[1]) // 2

    @classmethod
    def from_params(cls, params: Any, normalize_observations: bool, activation: str) -> PolicyWeights:
        """From Brax params ``(normalizer_state, policy_params, value or q params)`` (PPO or SAC)."""
        normalizer, policy = params[0], params[1]["params"]
        layers = [policy[f"hidden_{i}"] for i in range(len(policy))]
        obs_size = int(np.shape(layers[0]["kernel"])[0])
        if normalize_observations:
            mean, std = np.asarray(normalizer.mean, np.float32), np.asarray(normalizer.std, np.float32)
        else:
            mean, std = np.zeros(obs_size, np.float32), np.ones(obs_size, np.float32)
        return cls(
            mean=mean, std=std,
            kernels=tuple(np.asarray(layer["kernel"], np.float32) for layer in layers),
            biases=tuple(np.asarray(layer["bias"], np.float32) for layer in layers),
            activation=activation,
        )

    def arrays(self) -> dict[str, np.ndarray]:
        """Every array by its name in the files: ``mean``, ``std``, ``kernel_<i>``, ``bias_<i>``."""
        return {"mean": self.mean, "std": self.std, **{f"kernel_{i}": k for i, k in enumerate(self.kernels)},
                **{f"bias_{i}": b for i, b in enumerate(self.biases)}}

    def check(self, meta: dict[str, Any], source: str | Path) -> None:
        """ValueError naming ``source`` unless these layers are the network ``meta`` describes
        (obs and action sizes, ``network.policy_hidden_layer_sizes`` when given) with finite float32 weights."""
        if self.activation not in ACTIVATIONS:
            raise InputError(f"{source}: activation must be one of {sorted(ACTIVATIONS)}, got {self.activation!r}")
        if not self.kernels or len(self.kernels) != len(self.biases):
            raise InputError(f"{source}: {len(self.kernels)} kernels and {len(self.biases)} biases (need equal, >= 1)")
        for name, value in self.arrays().items():
            schema.array(source, name, value, dtype="float32")
        obs_size, action_size = meta["obs_size"], meta["action_size"]
        if self.mean.shape != (obs_size,) or self.std.shape != (obs_size,):
            raise InputError(f"{source}: normalizer mean {self.mean.shape} / std {self.std.shape}, expected "
                             f"({obs_size},)")
        width = obs_size
        for i, (kernel, bias) in enumerate(zip(self.kernels, self.biases)):
            if kernel.ndim != 2 or kernel.shape[0] != width or bias.shape != kernel.shape[1:]:
                raise InputError(f"{source}: layer {i} has kernel {kernel.shape} and bias {bias.shape}; its input is "
                                 f"{width} wide")
            width = kernel.shape[1]
        if width != 2 * action_size:
            raise InputError(f"{source}: last layer outputs {width}, expected 2 x action_size = {2 * action_size}")
        hidden = [int(k.shape[1]) for k in self.kernels[:-1]]
        expected = meta.get("network", {}).get("policy_hidden_layer_sizes")
        if expected is not None and hidden != list(expected):
            raise InputError(f"{source}: hidden layers {hidden}, but its metadata says policy_hidden_layer_sizes "
                             f"{list(expected)} (truncated network?)")
        if not np.all(self.std > 0):
            raise InputError(f"{source}: std must be positive, has {int(np.sum(~(self.std > 0)))} entries <= 0")


def check_metadata(meta: Any, source: str | Path) -> dict[str, Any]:
    """``meta`` with ``action_size`` filled in (from ``action_map.scale``); ValueError naming
    ``source`` when a field that rebuilds the env or the policy (``env``, ``env_config``,
    ``obs_size``, ``action_map``, ``network`` and ``algo`` when present) is missing or of the wrong kind."""
    schema.fields(source, meta, {"action_map": schema.OBJECT}, label="metadata field")
    action_map = schema.fields(source, meta["action_map"], {"scale": schema.list_of(schema.NUMBER)},
                               where="action_map.", label="metadata field")
    meta = {"action_size": len(action_map["scale"]), **meta}
    schema.fields(source, meta, {"env": schema.STRING, "env_config": schema.OBJECT, "obs_size": schema.integer(1),
                                 "action_size": schema.integer(1), "network": schema.optional(schema.OBJECT),
                                 "algo": schema.optional(schema.one_of(("ppo", "sac")))},
                  label="metadata field")
    numbers = schema.list_of(schema.NUMBER, meta["action_size"])
    schema.fields(source, action_map, {"scale": numbers, "offset": numbers}, where="action_map.",
                  label="metadata field")
    schema.fields(source, meta.get("network", {}), {k: schema.optional(v) for k, v in NETWORK.items()},
                  where="network.", label="metadata field")
    return meta


def check_headers(found: dict[str, npz.Header], meta: dict[str, Any], source: str | Path) -> None:
    """InputError naming ``source`` unless the weights of a policy ``.npz`` (their headers ``found``) are
    float32 and no larger than ``meta``'s network (checked metadata) allows: vectors of at most its widest
    layer, kernels of at most its square (layer widths not listed: :data:`MAX_UNLISTED_WIDTH`)."""
    hidden = meta.get("network", {}).get("policy_hidden_layer_sizes")
    widest = max(meta["obs_size"], 2 * meta["action_size"], *(hidden if hidden is not None else [MAX_UNLISTED_WIDTH]))
    layers = len(hidden) + 1 if hidden is not None else MAX_UNLISTED_LAYERS
    weights = {name: header for name, header in found.items() if name not in TEXT_ARRAYS}
    for name, (shape, dtype) in weights.items():
        if dtype != np.float32:
            raise InputError(f"{source}: {name} must be a float32 array, got {dtype} array of shape {shape}")
    npz.limit(source, weights, {n: 4 * widest ** (2 if n.startswith("kernel_") else 1) for n in weights},
              f"a policy of its metadata's sizes (widest layer {widest})")
    if len(weights) > 2 * layers + 2:
        raise InputError(f"{source}: {len(weights)} weight arrays, more than a network of {layers} layers holds")


def forward(weights: PolicyWeights, obs, scale, offset, xp=np):
    """Env actions ``(..., action_size)`` for observations ``(..., obs_size)``, in array module ``xp``
    (numpy, or jax.numpy inside jit), computed in ``obs``'s float dtype or wider."""
    x = (obs - weights.mean) / weights.std
    for i, (kernel, bias) in enumerate(zip(weights.kernels, weights.biases)):
        x = x @ kernel + bias
        if i < len(weights.kernels) - 1:
            x = ACTIVATIONS[weights.activation](xp, x)
    return xp.tanh(x[..., : weights.action_size]) * scale + offset


class NumpyPolicy:
    """The exported policy in numpy: ``NumpyPolicy.load(path)(obs (..., obs_size)) -> actions (..., 4)``."""

    def __init__(self, weights: PolicyWeights, meta: dict[str, Any], action_scale: np.ndarray,
                 action_offset: np.ndarray):
        if weights.activation not in ACTIVATIONS:
            raise InputError(f"activation must be one of {sorted(ACTIVATIONS)}, got {weights.activation!r}")
        self.weights, self.metadata = weights, meta
        self.scale, self.offset = np.asarray(action_scale, np.float32), np.asarray(action_offset, np.float32)

    @classmethod
    def checked(cls, weights: PolicyWeights, meta: Any, source: str | Path) -> NumpyPolicy:
        """The policy after :func:`check_metadata` and :meth:`PolicyWeights.check` (ValueError naming ``source``)."""
        meta = check_metadata(meta, source)
        weights.check(meta, source)
        return cls(weights, meta, meta["action_map"]["scale"], meta["action_map"]["offset"])

    @classmethod
    def load(cls, path: str | Path) -> NumpyPolicy:
        """From an ``.npz`` written by :meth:`save`; ValueError naming ``path`` when it is not a
        complete, finite policy (see :meth:`checked`). The arrays' headers are checked first
        (:func:`check_headers`): a small file whose arrays would expand to gigabytes is never read."""
        try:
            found = npz.headers(path)
            npz.limit(path, found, dict.fromkeys(TEXT_ARRAYS, MAX_TEXT_BYTES), "a policy's metadata")
            text = npz.read(path, names=TEXT_ARRAYS)
            meta = json.loads(str(text["metadata"]))
        except FileNotFoundError:
            raise
        except npz.Unreadable as err:
            raise InputError(f"{path} is not an exported so101_mjx policy (.npz): {err.reason}") from None
        except Exception as err:  # key or JSON errors: not a policy file
            raise InputError(f"{path} is not an exported so101_mjx policy (.npz): {err}") from None
        check_headers(found, check_metadata(meta, path), path)
        try:
            f = npz.read(path)
            indices = sorted(int(k.removeprefix("kernel_")) for k in f if k.startswith("kernel_"))
            if indices != list(range(len(indices))):
                raise InputError(f"layers {indices}, expected 0..{len(indices) - 1}")
            weights = PolicyWeights(
                mean=f["mean"], std=f["std"], kernels=tuple(f[f"kernel_{i}"] for i in indices),
                biases=tuple(f[f"bias_{i}"] for i in indices), activation=str(text["activation"]),
            )
        except npz.Unreadable as err:
            raise InputError(f"{path} is not an exported so101_mjx policy (.npz): {err.reason}") from None
        except Exception as err:  # key errors: not a policy file
            raise InputError(f"{path} is not an exported so101_mjx policy (.npz): {err}") from None
        return cls.checked(weights, meta, path)

    def save(self, path: str | Path) -> None:
        w = self.weights
        layers = {f"kernel_{i}": k for i, k in enumerate(w.kernels)} | {f"bias_{i}": b for i, b in enumerate(w.biases)}
        with atomic_path(path) as tmp, open(tmp, "wb") as file:
            # numpy's stub: **arrays could name allow_pickle
            np.savez(file, mean=w.mean, std=w.std, activation=w.activation,
                     metadata=json.dumps(self.metadata), **layers)  # type: ignore[arg-type]

    @property
    def obs_size(self) -> int:
        return self.weights.obs_size

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        return forward(self.weights, np.asarray(obs, np.float64), self.scale, self.offset).astype(np.float32)
