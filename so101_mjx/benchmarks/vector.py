"""``so101-mjx bench vector``: :class:`~so101_mjx.gym.vector.SO101VectorEnv` against gymnasium's ``SyncVectorEnv``
over the gym env (what ``lerobot-eval`` builds for a plugin env without a vector env of its own), the same task,
batch and actions, as env-steps/s; with ``image_size``, both observe the frames of ``cameras`` at that size, drawn
from the ``quality`` render model."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from so101_mjx import _progress
from so101_mjx.benchmarks import interleaved_times, print_table
from so101_mjx.envs import registry
from so101_mjx.gym.vector import SO101VectorEnv


def stepper(env: gym.vector.VectorEnv, actions: np.ndarray):
    """A timed run: ``len(actions)`` steps of ``env`` (autoresets included), reset with seed 0 first."""

    def run() -> None:
        env.reset(seed=0)
        for action in actions:
            env.step(action)

    return run


def bench(task: str, batch: list[int], steps: int, repeats: int, image_size: int | None = None,
          cameras: tuple[str, ...] = ("front",), quality: str = "full") -> None:
    """Print env-steps/s of both vector envs at each batch size (``steps`` steps per timed run, the median of
    ``repeats`` interleaved runs) and their ratio; with ``image_size``, observing square frames of that size of
    each of ``cameras``, from the ``quality`` render model (``"full"``: the scene as shipped)."""
    from so101_mjx.gym import GymRenderingSpec  # registers the gym ids

    name = registry.canonical(task)
    vector_pixels: dict[str, Any] = {}  # state observations: both envs as they are made by default
    gym_pixels: dict[str, Any] = {}
    if image_size is not None:
        frames = {"image_obs": True, "image_cameras": tuple(cameras), "image_quality": quality}
        vector_pixels = {**frames, "render_size": (image_size, image_size)}
        gym_pixels = {**frames, "render_spec": GymRenderingSpec(height=image_size, width=image_size)}
    rows = []
    for n in batch:
        _progress.phase(f"bench vector: {n} worlds of {name}")
        ours = SO101VectorEnv(name, n, **vector_pixels)
        sync = gym.vector.SyncVectorEnv([lambda: gym.make(registry.NAMESPACE + name, **gym_pixels) for _ in range(n)],
                                        autoreset_mode=gym.vector.AutoresetMode.NEXT_STEP)
        low, high = ours.env.arm.action_bounds()
        actions = np.random.default_rng(0).uniform(low, high, (steps, n, len(low))).astype(np.float32)
        ours_t, sync_t = (np.median(t) for t in interleaved_times([stepper(ours, actions), stepper(sync, actions)],
                                                                  repeats))
        rows.append([n, n * steps / ours_t, n * steps / sync_t, sync_t / ours_t])
        ours.close()
        sync.close()
    observed = "state" if image_size is None else f"pixels.{'+'.join(cameras)} {image_size}x{image_size} {quality}"
    print(f"{name}: env-steps/s of SO101VectorEnv and of gymnasium's SyncVectorEnv over gym.make (backend c, "
          f"{observed} observations, {steps} steps per run after a reset, median of {repeats})")
    print_table(["worlds", "vector/s", "sync/s", "ratio"], rows)
