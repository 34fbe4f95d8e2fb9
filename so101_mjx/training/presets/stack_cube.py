"""Presets of SO101StackCube-v0, on its staged dense reward; ``cpu`` also starts half of its
training episodes along the scripted controller's successful episodes (``demo_start_prob``, see
:mod:`so101_mjx.training.demo_starts`); evals reset normally."""

import dataclasses

from so101_mjx.training.preset import BLOCK_CPU, BLOCK_GPU, tiny
from so101_mjx.training.presets.pick_place import PLACE_CONFIG

ENV = "SO101StackCube-v0"
DEFAULT = "cpu"
STACK_CONFIG = {**PLACE_CONFIG, "reward_type": "dense"}
# Holding a placed block short of success pays at most 2.1 per step (stack_cube.HOLD_STAGES of
# pick_place.STAGED_WEIGHTS, the jaw commanded open): with discounting 0.97 that is worth 70, less than
# the success bonus of 100, so finishing the stack pays more than holding it.
PRESETS = {
    "tiny": tiny(**STACK_CONFIG),
    # 16 epochs of 532,480 env steps, episodes of 200 control steps. Measured (JAX eval success, 128
    # episodes): seed 0 0.383 after epoch 5 (2.66M steps), 0.914 after epoch 7 (3.73M); seed 1 0.555 after
    # epoch 8 (4.26M), 0.820 after epoch 10 (5.32M), 0.953 after epoch 11 (5.86M). See docs/tasks.md.
    "cpu": dataclasses.replace(BLOCK_CPU, num_timesteps=8 * 1_024_000, num_evals=17, episode_length=200,
                               success_bonus=100.0, env_config=STACK_CONFIG),
    "gpu": dataclasses.replace(BLOCK_GPU, num_timesteps=300_000_000, success_bonus=100.0, env_config=STACK_CONFIG),
}
