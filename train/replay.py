"""``so101-mjx replay POLICY``: run an exported policy in the gymnasium CPU env (MuJoCo C).

``POLICY`` is a ``.onnx`` (run by onnxruntime; by the ``.npz`` beside it when onnxruntime is
missing) or a ``.npz`` (numpy runner). The env is ``so101_mjx/<env>`` built with the policy's
env config (``--env`` another env: its default config). An episode's success is
``info["succeed"]`` at its last step, terminated or truncated at the config's episode length.
"""

from __future__ import annotations

import argparse
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


def replay(
    path: str | Path, env: str | None = None, episodes: int = 100, seed: int = 0, video: str | None = None,
    video_episodes: int = 3,
) -> dict[str, float]:
    """Run ``episodes`` episodes; print and return success rate, mean return and mean length."""
    if episodes < 1:
        raise ValueError(f"--episodes must be >= 1, got {episodes}")
    if video:
        check_video_path(video)
    policy, meta = load_policy(path)
    name = env or meta["env"]
    gym_env = make_gym_env(name, meta["env_config"] if canonical(name) == meta["env"] else {})
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
    print(f"replay {Path(path).name} on so101_mjx/{name} (CPU MuJoCo, gymnasium): success rate "
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


def run(args: argparse.Namespace) -> int:
    replay(args.policy, args.env, args.episodes, args.seed, args.video, args.video_episodes)
    return 0
