"""Presets of SO101PushCube-v0, on its dense reward (reach behind the block, push progress, success).

``cpu`` (the default; backend c, a 2-core CPU) starts half of its training episodes along the
scripted push (``demo_start_prob``); its results are on the docs' Tasks page. ``gpu`` is sized like
PickPlace's and has not been run.
"""

from so101_mjx.training.preset import Preset, tiny

ENV = "SO101PushCube-v0"
DEFAULT = "cpu"
# random placements, 4 cm per action unit (as the pick tasks' training configs); top-down IK and
# jaw pads are the task's defaults
PUSH_CONFIG = {"random_block_position": True, "action_scale": 0.04, "reward_type": "dense"}
_NETWORKS = {"policy_hidden_layer_sizes": (128, 128, 128), "value_hidden_layer_sizes": (256, 256, 256)}
PRESETS = {
    "tiny": tiny(**PUSH_CONFIG),
    "cpu": Preset(
        num_timesteps=6 * 532_480, num_envs=256, batch_size=256, num_minibatches=8, unroll_length=20,
        num_updates_per_batch=4, learning_rate=5e-4, entropy_cost=1e-2, discounting=0.97, num_evals=7,
        success_bonus=50.0, demo_start_prob=0.5, env_config=PUSH_CONFIG, **_NETWORKS,
    ),
    "gpu": Preset(
        num_timesteps=100_000_000, num_envs=4096, batch_size=1024, num_minibatches=32, unroll_length=20,
        num_updates_per_batch=4, learning_rate=5e-4, entropy_cost=1e-2, discounting=0.97, num_evals=20,
        success_bonus=50.0, env_config=PUSH_CONFIG, **_NETWORKS,
    ),
}
