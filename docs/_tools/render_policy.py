"""The shipped policies (``pretrained:<name>``) at work, for the docs: docs/img/<short>_policy.gif (the first
successful episode in the gym env, closer than the front camera) and docs/img/<short>_success.png (five frames of
that episode, the last one its success), with <short> the task's short name and the variant's, if any
(``pickcube`` for SO101PickCube-v0, ``pickcube_joint`` for SO101PickCube-v0/joint).

    MUJOCO_GL=egl python docs/_tools/render_policy.py [NAME ...]   # default: every shipped policy

The camera is the scene's front camera with a narrower lens (:data:`FOVY`; :data:`WIDER` for some tasks), so
the block fills more of the frame; the GIF shows every control step in real time and holds the success. The
task's markers (a goal) are drawn where the episode had them.
"""

from __future__ import annotations

import sys
from pathlib import Path

import mujoco
import numpy as np
from PIL import Image

import so101_mjx
from so101_mjx.render.camera import CameraSpec
from so101_mjx.render.frames import FrameRenderer
from so101_mjx.training.policies import PRETRAINED, Policy, shipped
from so101_mjx.training.replay import make_gym_env

OUT = Path(__file__).resolve().parents[1] / "img"
HEIGHT, WIDTH = 180, 240
FOVY = 34.0  # deg; the front camera's own is 45
WIDER = {"SO101PushCube-v0": 45.0, "SO101StackCube-v0": 45.0}  # deg: tasks whose block and goal leave a narrower frame
HOLD = 8  # GIF frames the success is held for
STRIP = 5  # frames in the still

Step = tuple[np.ndarray, dict[str, np.ndarray]]  # qpos (nq,) and marker positions by site


def successful_episode(policy: Policy, seeds: range = range(20)) -> tuple[list[Step], mujoco.MjModel]:
    """The joint positions and marker positions at every control step of the first episode (over ``seeds``) that
    succeeds, and its gym env's model."""
    name, config = policy.env_for()
    env = make_gym_env(name, config)
    try:
        for seed in seeds:
            obs, _ = env.reset(seed=seed)
            task = env.unwrapped
            steps, done, info = [task.scene()], False, {}
            while not done:
                obs, _, terminated, truncated, info = env.step(policy.gym_fn(obs))
                steps.append(task.scene())
                done = terminated or truncated
            if info.get("succeed"):
                return steps, task.model
    finally:
        env.close()
    raise RuntimeError(f"{policy.env} succeeded in none of the seeds {seeds}")


def render(name: str) -> None:
    policy = so101_mjx.load_policy(PRETRAINED + name)
    task, _, variant = name.partition("/")
    steps, model = successful_episode(policy)
    renderer = FrameRenderer(model, HEIGHT, WIDTH, "front", spec=CameraSpec(fovy=WIDER.get(task, FOVY)))
    try:
        frames = [Image.fromarray(renderer.frame(q, markers)) for q, markers in steps]
    finally:
        renderer.close()
    short = task.removeprefix("SO101").split("-v")[0].lower() + (f"_{variant}" if variant else "")
    shown = frames + [frames[-1]] * HOLD
    step_ms = round(1000 / policy.control_rate)  # one control step per GIF frame, in real time
    OUT.mkdir(exist_ok=True)
    gif, still = OUT / f"{short}_policy.gif", OUT / f"{short}_success.png"
    shown[0].save(gif, save_all=True, append_images=shown[1:], duration=step_ms, loop=0, optimize=True)
    picks = np.linspace(0, len(frames) - 1, STRIP).round().astype(int)
    strip = Image.new("RGB", (WIDTH * STRIP, HEIGHT))
    for i, k in enumerate(picks):
        strip.paste(frames[k], (i * WIDTH, 0))
    strip.save(still, optimize=True)
    print(f"{name}: {len(steps) - 1} control steps; {gif}, {still}")


def main() -> None:
    for name in sys.argv[1:] or shipped():
        render(name)


if __name__ == "__main__":
    main()
