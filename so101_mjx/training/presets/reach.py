"""Presets of SO101Reach-v0."""

from so101_mjx.training.preset import Preset, Renamed, Variant, tiny

ENV = "SO101Reach-v0"
DEFAULT = "cpu"
# joint mode as a real follower takes it: six motor targets in degrees at 30 Hz, here as offsets from the
# measured positions of at most 3 degrees per step
JOINT_CONFIG = {"control_mode": "joint", "relative_joint_targets": True, "max_relative_target": 3.0}
VARIANTS = {"joint": Variant(JOINT_CONFIG)}
# cpu's recipe in joint mode, 8 epochs of 307,200 env steps: the follower's action space, a policy for the
# deploy loop (with absolute targets, the policy's [-1, 1] onto each motor's range, the same recipe stalled
# at 0-2 % success; measured: see docs/tasks.md#reach); tiny in joint mode: the tests' deploy policies
RENAMED = {
    "joint": Renamed("cpu", "joint", {"num_timesteps": 8 * 307_200, "num_evals": 9}),
    "tiny-joint": Renamed("tiny", "joint"),
}
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
