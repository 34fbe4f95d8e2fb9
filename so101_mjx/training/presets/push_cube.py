"""Presets of SO101PushCube-v0, on its dense reward (reach behind the block, push progress, success).

``cpu`` (the default; backend c, a 2-core CPU) starts half of its training episodes along the
scripted push (``demo_start_prob``); ``fast`` is its recipe with twice the gradient steps, run with a 5 ms
physics step (``--env-config 5ms``); their results are on the docs' Tasks page. ``gpu`` is sized like
PickPlace's and has not been run.
"""

import dataclasses

from so101_mjx.training.preset import BLOCK_CPU, BLOCK_CPU_FAST, BLOCK_GPU, tiny

ENV = "SO101PushCube-v0"
DEFAULT = "cpu"
# random placements, 4 cm per action unit (as the pick tasks' training configs); top-down IK and
# jaw pads are the task's defaults
PUSH_CONFIG = {"random_block_position": True, "action_scale": 0.04, "reward_type": "dense"}
PRESETS = {
    "tiny": tiny(**PUSH_CONFIG),
    "cpu": dataclasses.replace(BLOCK_CPU, num_timesteps=6 * 532_480, num_evals=7, env_config=PUSH_CONFIG),
    # cpu's recipe with twice the gradient steps per env step (BLOCK_CPU_FAST), 6 epochs of 266,240 env
    # steps; trained with --env-config 5ms (a 5 ms physics step). Measured: see docs/tasks.md.
    "fast": dataclasses.replace(BLOCK_CPU_FAST, num_timesteps=6 * 266_240, num_evals=7,
                                env_config=PUSH_CONFIG),
    "gpu": dataclasses.replace(BLOCK_GPU, num_timesteps=100_000_000, env_config=PUSH_CONFIG),
}
