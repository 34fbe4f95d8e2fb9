"""Render the five built-in tasks with the library's own renderer (docs/img/tasks.png and one PNG per task).

    MUJOCO_GL=egl python docs/_tools/render_tasks.py

Each task runs its demonstrator (the scripted controller; PickCube's pick-and-lift) in one world on
backend ``c`` from a fixed reset key; the frame is the front camera at the step given in
:data:`FRAMES`, with the task's markers (goal, target) drawn.
"""

from __future__ import annotations

from pathlib import Path

import jax
import numpy as np
from PIL import Image, ImageDraw

import so101_mjx
from so101_mjx.envs.rollout import run_episodes
from so101_mjx.render.frames import FrameRenderer

OUT = Path(__file__).resolve().parents[1] / "img"
# task -> (control step to show, env config)
FRAMES = {
    "SO101Reach-v0": (12, {}),
    "SO101PickCube-v0": (14,
                         {"random_block_position": True, "top_down_ik": True, "jaw_pads": True, "action_scale": 0.04}),
    "SO101PickPlace-v0": (24, {"random_block_position": True, "action_scale": 0.025}),
    "SO101PushCube-v0": (30, {"random_block_position": True}),
    "SO101StackCube-v0": (40, {"random_block_position": True, "action_scale": 0.025}),
}
HEIGHT, WIDTH = 240, 320


def task_frame(name: str, step: int, config: dict) -> np.ndarray:
    env = so101_mjx.make(name, backend="c", **config)
    out = run_episodes(env, "demonstrator", jax.random.PRNGKey(3), 1, steps=step + 1, trajectory=True)
    info = jax.tree_util.tree_map(lambda x: np.asarray(x)[0, step], out["states"].info)
    markers = {site: np.asarray(pos) for site, pos in env.marker_positions(info).items()}
    renderer = FrameRenderer(env.mj_model, HEIGHT, WIDTH)
    try:
        return renderer.frame(np.asarray(out["states"].physics.qpos[0, step]), markers)
    finally:
        renderer.close()


def main() -> None:
    OUT.mkdir(exist_ok=True)
    tiles = []
    for name, (step, config) in FRAMES.items():
        image = Image.fromarray(task_frame(name, step, config))
        image.save(OUT / f"{name.removeprefix('SO101').removesuffix('-v0').lower()}.png", optimize=True)
        ImageDraw.Draw(image).text((8, 6), name, fill=(255, 255, 255))
        tiles.append(image.resize((WIDTH * 3 // 4, HEIGHT * 3 // 4), Image.LANCZOS))
    w, h = tiles[0].size
    strip = Image.new("RGB", (w * len(tiles), h))
    for i, tile in enumerate(tiles):
        strip.paste(tile, (i * w, 0))
    strip.save(OUT / "tasks.png", optimize=True)


if __name__ == "__main__":
    main()
