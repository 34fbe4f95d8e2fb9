"""Presets of SO101Reach-v0."""

from so101_mjx.training.preset import Preset, tiny

ENV = "SO101Reach-v0"
DEFAULT = "cpu"
# joint mode as a real follower takes it: six motor targets in degrees at 30 Hz, here as offsets from the
# measured positions of at most 3 degrees per step
JOINT_CONFIG = {"control_mode": "joint", "relative_joint_targets": True, "max_relative_target": 3.0}
PRESETS = {
    "tiny": tiny(),
    "tiny-joint": tiny(**JOINT_CONFIG),  # the tests' preset in joint mode (deploy's policies)
    "cpu": Preset(
        num_timesteps=600_000, num_envs=256, batch_size=256, num_minibatches=8, unroll_length=10,
        num_updates_per_batch=4, learning_rate=1e-3, entropy_cost=5e-3, discounting=0.95, num_evals=7,
    ),
    # cpu's recipe in joint mode (JOINT_CONFIG), 8 epochs of 307,200 env steps: the follower's action space,
    # a policy for the deploy loop. With absolute targets (the policy's [-1, 1] onto each motor's range) the
    # same recipe stalled at 0-2 % success. Measured: see docs/tasks.md#reach.
    "joint": Preset(
        num_timesteps=8 * 307_200, num_envs=256, batch_size=256, num_minibatches=8, unroll_length=10,
        num_updates_per_batch=4, learning_rate=1e-3, entropy_cost=5e-3, discounting=0.95, num_evals=9,
        env_config=JOINT_CONFIG,
    ),
    "gpu": Preset(
        num_timesteps=10_000_000, num_envs=2048, batch_size=1024, num_minibatches=16, unroll_length=10,
        num_updates_per_batch=4, learning_rate=1e-3, entropy_cost=5e-3, discounting=0.95, num_evals=10,
    ),
}
