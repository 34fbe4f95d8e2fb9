"""``so101-mjx replay POLICY``: run an exported policy in the gymnasium CPU env (MuJoCo C).

``POLICY`` is a ``.onnx`` (run by onnxruntime; by the ``.npz`` beside it when onnxruntime is
missing) or a ``.npz`` (numpy runner). The env is ``so101_mjx/<env>`` built with the policy's
env config (``--env`` another env: its default config); with ``--reference``, lerobot_env_so101's
own env as shipped (its mesh collisions and noslip), given the config fields it knows. An
episode's success is ``info["succeed"]`` at its last step, terminated or truncated at the
config's episode length.
"""

from __future__ import annotations

import argparse
import inspect
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from so101_mjx.envs.registry import canonical
from so101_mjx.render import check_video_path, write_video
from train.export import METADATA_KEY, NumpyPolicy

Policy = Callable[[np.ndarray], np.ndarray]


def _onnx_policy(path: Path) -> tuple[Policy, dict[str, Any]] | None:
    """onnxruntime session for ``path``; None when onnxruntime is not installed."""
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    try:
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        meta = json.loads(session.get_modelmeta().custom_metadata_map[METADATA_KEY])
    except Exception as err:  # onnxruntime raises its own exception types for invalid models
        raise ValueError(f"{path} is not an exported so101_mjx ONNX policy: {err}") from None
    return (lambda obs: session.run(["actions"], {"obs": np.asarray(obs, np.float32)})[0]), meta


def load_policy(path: str | Path) -> tuple[Policy, dict[str, Any]]:
    """``(policy(obs (B, obs_size)) -> actions (B, 4), metadata)`` from an exported file."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"policy not found: {path}")
    if path.suffix == ".onnx":
        loaded = _onnx_policy(path)
        if loaded is not None:
            return loaded
        if not path.with_suffix(".npz").is_file():
            raise ValueError(f"onnxruntime is not installed and {path.with_suffix('.npz')} is missing")
        print("onnxruntime is not installed: using the numpy runner on the .npz")
        path = path.with_suffix(".npz")
    elif path.suffix != ".npz":
        raise ValueError(f"policy must be a .onnx or .npz file, got {path}")
    policy = NumpyPolicy.load(path)
    return policy, policy.metadata


def make_gym_env(name: str, env_config: dict[str, Any], render: bool = False):
    """``so101_mjx/<name>`` with ``env_config``, truncated at its ``episode_length``."""
    import gymnasium

    import so101_mjx.gym  # noqa: F401  (registers the ids)
    from so101_mjx.envs.registry import NAMESPACE, default_config

    name = canonical(name)
    length = env_config.get("episode_length", default_config(name).episode_length)
    config = {k: v for k, v in env_config.items() if k != "image_obs"}
    return gymnasium.make(NAMESPACE + name, max_episode_steps=length, disable_env_checker=True, **config)


def make_reference_env(name: str, env_config: dict[str, Any]):
    """lerobot_env_so101's env for ``name`` with the fields of ``env_config`` it accepts,
    truncated at ``episode_length``; ValueError when it is not installed or has no such task."""
    import gymnasium

    from so101_mjx.envs.registry import default_config
    from so101_mjx.parity import REF_ENVS

    try:
        import lerobot_env_so101 as ref
    except ImportError:
        raise ValueError("--reference needs lerobot_env_so101: pip install lerobot_env_so101==0.4.0") from None
    name = canonical(name)
    if name not in REF_ENVS:
        raise ValueError(f"--reference: lerobot_env_so101 has no {name}; it has {sorted(REF_ENVS)}")
    cls = getattr(ref, REF_ENVS[name])
    accepted = set(inspect.signature(cls).parameters) - {"image_obs", "render_mode", "render_spec", "seed"}
    length = env_config.get("episode_length", default_config(name).episode_length)
    return gymnasium.wrappers.TimeLimit(cls(**{k: v for k, v in env_config.items() if k in accepted}), length)


def replay(
    path: str | Path, env: str | None = None, episodes: int = 100, seed: int = 0, video: str | None = None,
    video_episodes: int = 3, reference: bool = False,
) -> dict[str, float]:
    """Run ``episodes`` episodes; print and return success rate, mean return and mean length.

    ``reference``: in lerobot_env_so101's env instead of ours (see :func:`make_reference_env`).
    """
    if episodes < 1:
        raise ValueError(f"--episodes must be >= 1, got {episodes}")
    if video:
        check_video_path(video)
    policy, meta = load_policy(path)
    name = env or meta["env"]
    env_config = meta["env_config"] if canonical(name) == meta["env"] else {}
    gym_env = make_reference_env(name, env_config) if reference else make_gym_env(name, env_config)
    where = f"lerobot_env_so101 {type(gym_env.unwrapped).__name__} (as shipped)" if reference else f"so101_mjx/{name}"
    obs, _ = gym_env.reset(seed=seed)
    obs_size = sum(np.size(v) for v in obs.values())
    if obs_size != meta["obs_size"]:
        raise ValueError(f"policy expects observations of size {meta['obs_size']} ({meta['env']}); {name} gives {obs_size}")
    successes, returns, lengths, frames = [], [], [], []
    for episode in range(episodes):
        obs, _ = gym_env.reset(seed=seed + episode)
        ret, length, done, info = 0.0, 0, False, {"succeed": False}
        while not done:
            flat = np.concatenate([obs["agent_pos"], obs["environment_state"]])[None]
            obs, reward, terminated, truncated, info = gym_env.step(policy(flat)[0])
            ret, length, done = ret + reward, length + 1, terminated or truncated
            if video and episode < video_episodes:
                frames.append(gym_env.render())
        successes.append(bool(info["succeed"]))
        returns.append(ret)
        lengths.append(length)
    gym_env.close()
    result = {"success_rate": float(np.mean(successes)), "mean_return": float(np.mean(returns)),
              "mean_length": float(np.mean(lengths)), "episodes": episodes}
    print(f"replay {Path(path).name} on {where} (CPU MuJoCo, gymnasium): success rate "
          f"{result['success_rate']:.3f} ({sum(successes)}/{episodes}), mean return {result['mean_return']:.3f}, "
          f"mean episode length {result['mean_length']:.1f}")
    if video:
        write_video(frames, video, fps=gym_env.metadata["render_fps"])
        print(f"video of the first {min(episodes, video_episodes)} episodes: {video}")
    return result


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("policy", help="exported policy: .onnx or .npz")
    parser.add_argument("--env", default=None, help="env name (default: the policy's)")
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--video", default=None, help="write the first episodes to this .mp4 or .gif (needs a GL backend)")
    parser.add_argument("--video-episodes", type=int, default=3)
    parser.add_argument("--reference", action="store_true", help="replay in lerobot_env_so101's own env (pick tasks)")


def run(args: argparse.Namespace) -> int:
    replay(args.policy, args.env, args.episodes, args.seed, args.video, args.video_episodes, args.reference)
    return 0
