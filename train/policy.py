"""The deterministic policy as numpy arrays, and its numpy runner (numpy only: no JAX needed).

The action is ``tanh(loc) · action_scale + action_offset`` (:func:`train.envs.to_env_action`),
``loc`` being the first half of the policy MLP's output on ``(obs − mean) / std``.
:class:`PolicyWeights` holds the normalizer and dense layers; the ONNX graph
(:mod:`train.export`) and :class:`NumpyPolicy` are built from it.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np

NUMPY_ACTIVATIONS = {
    "relu": lambda x: np.maximum(x, 0.0),
    "tanh": np.tanh,
    "swish": lambda x: x / (1.0 + np.exp(-x)),
    "silu": lambda x: x / (1.0 + np.exp(-x)),
}


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
    def from_params(cls, params: Any, normalize_observations: bool, activation: str) -> "PolicyWeights":
        """From Brax PPO params ``(normalizer_state, policy_params, value_params)``."""
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



class NumpyPolicy:
    """The exported policy in numpy: ``NumpyPolicy.load(path)(obs (..., obs_size)) -> actions (..., 4)``."""

    def __init__(self, weights: PolicyWeights, meta: dict[str, Any], action_scale: np.ndarray, action_offset: np.ndarray):
        if weights.activation not in NUMPY_ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(NUMPY_ACTIVATIONS)}, got {weights.activation!r}")
        self.weights, self.metadata = weights, meta
        self._scale, self._offset = np.asarray(action_scale, np.float32), np.asarray(action_offset, np.float32)

    @classmethod
    def load(cls, path: str | Path) -> "NumpyPolicy":
        try:
            with np.load(path, allow_pickle=False) as f:
                meta = json.loads(str(f["metadata"]))
                n = len([k for k in f.files if k.startswith("kernel_")])
                weights = PolicyWeights(
                    mean=f["mean"], std=f["std"], kernels=tuple(f[f"kernel_{i}"] for i in range(n)),
                    biases=tuple(f[f"bias_{i}"] for i in range(n)), activation=str(f["activation"]),
                )
        except FileNotFoundError:
            raise
        except Exception as err:  # zip, key or JSON errors: not a policy file
            raise ValueError(f"{path} is not an exported so101_mjx policy (.npz): {err}") from None
        return cls(weights, meta, meta["action_map"]["scale"], meta["action_map"]["offset"])

    def save(self, path: str | Path) -> None:
        w = self.weights
        layers = {f"kernel_{i}": k for i, k in enumerate(w.kernels)} | {f"bias_{i}": b for i, b in enumerate(w.biases)}
        np.savez(path, mean=w.mean, std=w.std, activation=w.activation, metadata=json.dumps(self.metadata), **layers)

    @property
    def obs_size(self) -> int:
        return self.weights.obs_size

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        w = self.weights
        x = (np.asarray(obs, np.float64) - w.mean) / w.std
        act = NUMPY_ACTIVATIONS[w.activation]
        for i, (kernel, bias) in enumerate(zip(w.kernels, w.biases)):
            x = x @ kernel + bias
            if i < len(w.kernels) - 1:
                x = act(x)
        return (np.tanh(x[..., : w.action_size]) * self._scale + self._offset).astype(np.float32)
