"""Presets of SO101Reach-v0."""

from so101_mjx.training.preset import Preset, tiny

ENV = "SO101Reach-v0"
DEFAULT = "cpu"
PRESETS = {
    "tiny": tiny(),
    "cpu": Preset(
        num_timesteps=600_000, num_envs=256, batch_size=256, num_minibatches=8, unroll_length=10,
        num_updates_per_batch=4, learning_rate=1e-3, entropy_cost=5e-3, discounting=0.95, num_evals=7,
    ),
    "gpu": Preset(
        num_timesteps=10_000_000, num_envs=2048, batch_size=1024, num_minibatches=16, unroll_length=10,
        num_updates_per_batch=4, learning_rate=1e-3, entropy_cost=5e-3, discounting=0.95, num_evals=10,
    ),
}
