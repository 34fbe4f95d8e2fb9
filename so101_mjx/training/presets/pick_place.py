"""Presets of SO101PickPlace-v0 (sparse reward only, as the reference). The ``gpu`` preset has not been run."""

from so101_mjx.training.preset import Preset, tiny

ENV = "SO101PickPlace-v0"
DEFAULT = "gpu"
# top-down IK, jaw pads, random placements, 4 cm per action unit (also PickCube's training config)
PLACE_CONFIG = {"top_down_ik": True, "jaw_pads": True, "random_block_position": True, "action_scale": 0.04}
PRESETS = {
    "tiny": tiny(**PLACE_CONFIG),
    "gpu": Preset(
        num_timesteps=200_000_000, num_envs=4096, batch_size=1024, num_minibatches=32, unroll_length=20,
        num_updates_per_batch=4, learning_rate=5e-4, entropy_cost=1e-2, discounting=0.98, num_evals=20,
        policy_hidden_layer_sizes=(256, 256, 256), value_hidden_layer_sizes=(256, 256, 256),
        env_config=PLACE_CONFIG,
    ),
}
