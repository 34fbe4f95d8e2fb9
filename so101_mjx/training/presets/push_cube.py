"""Presets of SO101PushCube-v0, on its dense reward (reach behind the block, push progress, success).

``cpu`` (the default; backend c, a 2-core CPU) starts half of its training episodes along the
scripted push (``demo_start_prob``); its results are on the docs' Tasks page. ``gpu`` is sized like
PickPlace's and has not been run.
"""

import dataclasses

from so101_mjx.training.preset import BLOCK_CPU, BLOCK_GPU, tiny

ENV = "SO101PushCube-v0"
DEFAULT = "cpu"
# random placements, 4 cm per action unit (as the pick tasks' training configs); top-down IK and
# jaw pads are the task's defaults
PUSH_CONFIG = {"random_block_position": True, "action_scale": 0.04, "reward_type": "dense"}
PRESETS = {
    "tiny": tiny(**PUSH_CONFIG),
    "cpu": dataclasses.replace(BLOCK_CPU, num_timesteps=6 * 532_480, num_evals=7, env_config=PUSH_CONFIG),
    "gpu": dataclasses.replace(BLOCK_GPU, num_timesteps=100_000_000, env_config=PUSH_CONFIG),
}
