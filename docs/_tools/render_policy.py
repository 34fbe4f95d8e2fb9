"""The shipped PickCube policy (``pretrained:SO101PickCube-v0``) at work, for the docs: docs/img/pickcube_policy.gif
(its first successful episode in the gym env, closer than the front camera) and docs/img/pickcube_success.png
(five frames of that episode, the last one its success).

    MUJOCO_GL=egl python docs/_tools/render_policy.py

The camera is the scene's front camera with a narrower lens (:data:`FOVY`), so the block fills more of the
frame; the GIF shows every control step in real time and holds the success.
"""

from __future__ import annotations

from pathlib import Path

import mujoco
import numpy as np
from PIL import Image

import so101_mjx
from so101_mjx.render.camera import CameraSpec
from so101_mjx.render.frames import FrameRenderer
from so101_mjx.training.policies import Policy
from so101_mjx.training.replay import make_gym_env

OUT = Path(__file__).resolve().parents[1] / "img"
POLICY = "pretrained:SO101PickCube-v0"
HEIGHT, WIDTH = 180, 240
FOVY = 34.0  # deg; the front camera's own is 45
HOLD = 8  # GIF frames the success is held for
STRIP = 5  # frames in the still


def successful_episode(policy: Policy, seeds: range = range(20)) -> tuple[list[np.ndarray], mujoco.MjModel]:
    """The joint positions (nq,) at every control step of the first episode (over ``seeds``) that succeeds, and
    its gym env's model."""
    name, config = policy.env_for()
    env = make_gym_env(name, config)
    try:
        for seed in seeds:
            obs, _ = env.reset(seed=seed)
            qpos, done, info = [env.unwrapped.data.qpos.copy()], False, {}
            while not done:
                obs, _, terminated, truncated, info = env.step(policy.gym_fn(obs))
                qpos.append(env.unwrapped.data.qpos.copy())
                done = terminated or truncated
            if info.get("succeed"):
                return qpos, env.unwrapped.model
    finally:
        env.close()
    raise RuntimeError(f"{POLICY} succeeded in none of the seeds {seeds}")


def main() -> None:
    policy = so101_mjx.load_policy(POLICY)
    qpos, model = successful_episode(policy)
    renderer = FrameRenderer(model, HEIGHT, WIDTH, "front", spec=CameraSpec(fovy=FOVY))
    try:
        frames = [Image.fromarray(renderer.frame(q)) for q in qpos]
    finally:
        renderer.close()
    shown = frames + [frames[-1]] * HOLD
    step_ms = round(1000 / policy.control_rate)  # one control step per GIF frame, in real time
    OUT.mkdir(exist_ok=True)
    shown[0].save(OUT / "pickcube_policy.gif", save_all=True, append_images=shown[1:], duration=step_ms, loop=0,
                  optimize=True)
    picks = np.linspace(0, len(frames) - 1, STRIP).round().astype(int)
    strip = Image.new("RGB", (WIDTH * STRIP, HEIGHT))
    for i, k in enumerate(picks):
        strip.paste(frames[k], (i * WIDTH, 0))
    strip.save(OUT / "pickcube_success.png", optimize=True)
    print(f"{len(qpos) - 1} control steps; {OUT / 'pickcube_policy.gif'}, {OUT / 'pickcube_success.png'}")


if __name__ == "__main__":
    main()
