"""A lerobot policy directory (``lerobot:PATH``) run batched across the jitted env's worlds.

The directory is what lerobot's ``save_pretrained`` or ``lerobot-train`` (``checkpoints/<step>/pretrained_model``)
writes: ``config.json``, ``model.safetensors``, and ``policy_preprocessor.json`` / ``policy_postprocessor.json``
with the normalization stats their steps name. The policy acts on the SO-101 follower's features:

- ``observation.state``: (6,) the motor positions in the follower's units (lerobot's default ``use_degrees``:
  degrees for the arm, 0-100 for the gripper), the joint-mode env's ``agent_pos``;
- ``observation.images.<camera>``: (3, S, S) frames of the scene's ``front`` and ``wrist`` cameras;
- ``action``: (6,) absolute motor targets in the same units.

It runs in its task's joint mode at the follower's 30 Hz with ``image_obs`` and those cameras at side S
(:func:`env_config`). Each control step, every world's observation goes to the policy in one call, built as
lerobot-eval builds it (``lerobot.envs.utils.preprocess_observation``: uint8 HWC frames to float CHW in [0, 1];
the task's instruction as ``task``; the policy's preprocessor; ``select_action``; its postprocessor), from
inside the jitted rollout through ``jax.pure_callback``. A chunking policy (ACT) keeps one action queue for the
batch, so the worlds re-plan together, as in lerobot-eval's vector envs; :meth:`Runner.reset` empties it
before each rollout.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from so101_mjx.errors import InputError, MissingFileError
from so101_mjx.robot import motors

PREFIX = "lerobot:"  # lerobot:<directory>
FILES = ("config.json", "model.safetensors", "policy_preprocessor.json", "policy_postprocessor.json")
CAMERAS = ("front", "wrist")  # the scene's cameras
IMAGE_PREFIX = "observation.images."
CONTROL_RATE = 30  # Hz: lerobot-record's default fps
EPISODE_SECONDS = 10  # an episode's length in simulated time (the reference's 100 steps at 10 Hz)
INSTALL = "pip install lerobot (Python >= 3.12) beside so101-mjx"


def _shape(feature: Any, name: str, source: Path) -> tuple[int, ...]:
    shape = feature.get("shape") if isinstance(feature, dict) else None
    if not (isinstance(shape, list) and all(isinstance(n, int) for n in shape)):
        raise InputError(f"{source}/config.json: feature {name!r} has no shape list, got {feature!r}")
    return tuple(shape)


def read_features(path: Path) -> tuple[tuple[str, ...], int]:
    """``(cameras, frame side)`` of the lerobot policy directory ``path``, checked against the follower's features;
    MissingFileError when it does not exist, InputError naming the file, feature or stats file that does not fit."""
    if not path.is_dir():
        raise MissingFileError(f"lerobot policy directory not found: {path}")
    missing = [name for name in FILES if not (path / name).is_file()]
    if missing:
        raise InputError(f"{path} is not a lerobot policy directory: {', '.join(missing)} missing (lerobot's "
                         "save_pretrained and lerobot-train's pretrained_model/ write config.json, model.safetensors "
                         "and the pre/post-processors with their normalization stats)")
    for pipeline in ("policy_preprocessor.json", "policy_postprocessor.json"):
        try:
            steps = json.loads((path / pipeline).read_text()).get("steps", [])
        except (ValueError, AttributeError):
            raise InputError(f"{path / pipeline} is not a lerobot processor pipeline (JSON with steps)") from None
        for step in steps:
            state = step.get("state_file") if isinstance(step, dict) else None
            if state and not (path / state).is_file():
                raise InputError(f"{path}: the normalization stats {state} that {pipeline} names are missing")
    try:
        config = json.loads((path / "config.json").read_text())
        inputs, outputs = dict(config["input_features"]), dict(config["output_features"])
    except (ValueError, KeyError, TypeError):
        raise InputError(f"{path}/config.json is not a lerobot policy config (input_features, "
                         "output_features)") from None
    size = len(motors.MOTORS)
    for name, features in (("observation.state", inputs), ("action", outputs)):
        if name not in features or _shape(features[name], name, path) != (size,):
            got = _shape(features[name], name, path) if name in features else "none"
            raise InputError(f"{path}: {name} must have shape ({size},) (the follower's six motor positions), "
                             f"got {got}")
    others = sorted(set(inputs) - {"observation.state"} - {k for k in inputs if k.startswith(IMAGE_PREFIX)})
    cameras = tuple(k[len(IMAGE_PREFIX):] for k in inputs if k.startswith(IMAGE_PREFIX))
    if others:
        raise InputError(f"{path}: it observes {others}, which the follower does not give (observation.state and "
                         f"observation.images.<camera> of {list(CAMERAS)})")
    if not cameras or set(cameras) - set(CAMERAS):
        raise InputError(f"{path}: its cameras must be among the scene's {list(CAMERAS)} (at least one), got "
                         f"{list(cameras)}")
    shapes = sorted({_shape(inputs[IMAGE_PREFIX + c], IMAGE_PREFIX + c, path) for c in cameras})
    side = shapes[0][-1]
    if shapes != [(3, side, side)] or side < 1:
        raise InputError(f"{path}: every camera's frames must have one shape (3, S, S) (square, channels first), "
                         f"got {shapes}")
    return cameras, side


def env_config(cameras: Sequence[str], side: int) -> dict[str, Any]:
    """The env config a lerobot policy of ``cameras`` at ``side`` px runs in: joint mode at 30 Hz for 10 s, motor
    positions in degrees, its cameras rendered at its frame size with ``record``'s default render model
    (``shadowed``: the frames of the datasets it records here)."""
    return {"control_mode": "joint", "control_dt": 1.0 / CONTROL_RATE, "episode_length": EPISODE_SECONDS * CONTROL_RATE,
            "joint_units": "degrees", "image_obs": True,
            "image_size": side, "image_cameras": list(cameras), "image_quality": "shadowed"}


class Runner:
    """The policy at ``path`` in torch on ``device``, with its pre- and postprocessor; ``runner(agent_pos,
    frames)`` is one control step of every world."""

    def __init__(self, path: Path, cameras: Sequence[str], device: str = "cpu") -> None:
        try:
            import torch
            from lerobot.configs.policies import PreTrainedConfig
            from lerobot.envs.utils import preprocess_observation
            from lerobot.policies.factory import get_policy_class, make_pre_post_processors
        except ImportError as err:
            raise InputError(f"a lerobot policy needs lerobot and torch ({INSTALL}): {err}") from None
        config = PreTrainedConfig.from_pretrained(str(path))
        config.pretrained_path, config.device = str(path), device
        if hasattr(config, "pretrained_backbone_weights"):
            config.pretrained_backbone_weights = None  # every weight is in model.safetensors: no ImageNet download
        self.policy = get_policy_class(config.type).from_pretrained(str(path), config=config)
        self.policy.eval()
        self.pre, self.post = make_pre_post_processors(config, pretrained_path=str(path),
                                                       preprocessor_overrides={"device_processor": {"device": device}})
        self.cameras = tuple(cameras)
        self._torch, self._preprocess = torch, preprocess_observation

    def reset(self) -> None:
        """Empty the action queue (before every rollout)."""
        self.policy.reset()

    def __call__(self, agent_pos: np.ndarray, *frames: np.ndarray, instruction: str = "") -> np.ndarray:
        """Actions (B, 6) float32 of ``agent_pos`` (B, 6) and one (B, S, S, 3) uint8 frame batch per camera, for the
        task ``instruction`` (lerobot's ``task``)."""
        pixels = {c: np.asarray(f, np.uint8) for c, f in zip(self.cameras, frames, strict=True)}
        obs = self._preprocess({"agent_pos": np.asarray(agent_pos, np.float32), "pixels": pixels})
        obs["task"] = [instruction] * len(agent_pos)
        with self._torch.inference_mode():
            action = self.post(self.policy.select_action(self.pre(obs)))
        return np.asarray(action.cpu().numpy(), np.float32)

    def jax_fn(self, instruction: str = "") -> Callable[[tuple[Any, ...], Any], Any]:
        """``(frames, agent_pos) -> actions`` for the task ``instruction``, traceable: a host callback that gets every
        vmapped world in one call."""
        import jax
        import jax.numpy as jnp

        def host(agent_pos: np.ndarray, *frames: np.ndarray) -> np.ndarray:
            if agent_pos.ndim == 1:  # one world, outside vmap
                return self(agent_pos[None], *(f[None] for f in frames), instruction=instruction)[0]
            return self(agent_pos, *frames, instruction=instruction)

        def act(frames: tuple[Any, ...], agent_pos: Any) -> Any:
            shape = jax.ShapeDtypeStruct((*agent_pos.shape[:-1], len(motors.MOTORS)), jnp.float32)
            return jax.pure_callback(host, shape, agent_pos, *frames, vmap_method="broadcast_all")

        return act
