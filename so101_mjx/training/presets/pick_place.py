"""Presets of SO101PickPlace-v0. ``cpu`` trains on the staged dense reward (``reward_type="dense"``,
see :mod:`so101_mjx.envs.tasks.pick_place`) with a success bonus, and starts half of its training
episodes along the scripted controller's successful episodes (``demo_start_prob``, see
:mod:`so101_mjx.training.demo_starts`); success stays the reference's sparse criterion and the
evals reset normally."""

import dataclasses

from so101_mjx.training.preset import BLOCK_CPU, BLOCK_CPU_FAST, BLOCK_GPU, tiny

ENV = "SO101PickPlace-v0"
DEFAULT = "cpu"
# top-down IK, jaw pads, random placements, 4 cm per action unit (also PickCube's training config)
PLACE_CONFIG = {"top_down_ik": True, "jaw_pads": True, "random_block_position": True, "action_scale": 0.04}
PLACE_TRAIN_CONFIG = {**PLACE_CONFIG, "reward_type": "dense"}
PRESETS = {
    "tiny": tiny(**PLACE_CONFIG),
    # 6 epochs of 1,024,000 env steps; episodes of 150 control steps (the scripted controller
    # places in ~50 at this action scale). Measured, seed 0: eval success 0.36 after epoch 2,
    # 1.000 from epoch 3 (3.07M steps); see docs/tasks.md.
    "cpu": dataclasses.replace(BLOCK_CPU, num_timesteps=6 * 1_024_000, num_evals=7, episode_length=150,
                               env_config=PLACE_TRAIN_CONFIG),
    # cpu's recipe with twice the gradient steps per env step (BLOCK_CPU_FAST), 6 epochs of 266,240 env
    # steps; trained with --env-config 5ms (a 5 ms physics step). Measured: see docs/tasks.md.
    "fast": dataclasses.replace(BLOCK_CPU_FAST, num_timesteps=6 * 266_240, num_evals=7, episode_length=150,
                                env_config=PLACE_TRAIN_CONFIG),
    "gpu": dataclasses.replace(BLOCK_GPU, num_timesteps=200_000_000, discounting=0.98, success_bonus=0.0,
                               policy_hidden_layer_sizes=(256, 256, 256), env_config=PLACE_CONFIG),
}
