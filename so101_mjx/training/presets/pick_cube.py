"""Presets of SO101PickCube-v0."""

import dataclasses

from so101_mjx.training.preset import BLOCK_CPU, BLOCK_CPU_FAST, BLOCK_GPU, Renamed, SacPreset, Variant, tiny
from so101_mjx.training.presets.pick_place import PLACE_CONFIG

ENV = "SO101PickCube-v0"
DEFAULT = "cpu"
PICK_CONFIG = {**PLACE_CONFIG, "reward_type": "dense"}
# PickCube trains on the reference's dense reward plus a grasp term (``PickCube.grasped``): with the
# dense reward alone PPO settles hovering at the block (1.2M steps: 0 % success, return ~17/100 steps).
PICK_TRAIN_CONFIG = {**PICK_CONFIG, "grasp_reward": 0.25}
SERVO_RANGES = {"delay_ticks": (0, 1), "backlash": (0.01, 0.035), "max_velocity": (3.0, 6.0), "deadband": (0.0, 0.0035)}
# The follower's action space (joint mode: six motor targets in degrees, here offsets of at most 10° from
# the measured positions) at the reference's 10 Hz and 2 ms physics, so that an episode is the Cartesian
# one's 100 steps. Measured: see docs/tasks.md.
JOINT = {"control_mode": "joint", "control_dt": 0.1, "physics_dt": 0.002, "relative_joint_targets": True,
         "max_relative_target": 10.0}
# joint mode at the follower's own 30 Hz (16 physics steps of 1/480 s), offsets of at most 6°, 300-step
# episodes (10 s); unrolls of 30 steps, discounting 0.99 (a horizon of ~3 s, as 0.97 at 10 Hz) and a
# success bonus of 100 (about reward / (1 - discounting))
JOINT_30HZ = {"control_mode": "joint", "relative_joint_targets": True, "max_relative_target": 6.0,
              "episode_length": 300}
# the servo model, its parameters drawn per motor at every reset around the defaults: delay 0-1 control
# ticks, backlash 0.6-2°, velocity limit 3-6 rad/s, deadband 0-0.2° (sim.servo; docs/sim2real.md)
SERVO = {"servo_model": {"ranges": SERVO_RANGES}}
VARIANTS = {
    "joint": Variant(JOINT),
    "joint-servo": Variant({**JOINT, **SERVO}),
    "joint-30hz": Variant(JOINT_30HZ, horizon={"unroll_length": 30, "discounting": 0.99, "success_bonus": 100.0}),
    # delays of 0-3 ticks (0-100 ms at 30 Hz)
    "joint-30hz-servo": Variant({**JOINT_30HZ, "servo_model": {"ranges": {**SERVO_RANGES, "delay_ticks": (0, 3)}}},
                                horizon={"unroll_length": 30, "discounting": 0.99, "success_bonus": 100.0}),
    "servo": Variant(SERVO),
}
# The runs the docs report under their former preset names (fast's recipe for 10 epochs of 102,400 env
# steps in joint mode; twice as long under the servo model, where at 1.02M steps seed 0 was at 0.63
# success; 24 and 48 epochs of 122,880 env steps at 30 Hz).
RENAMED = {
    "joint": Renamed("fast", "joint", {"num_timesteps": 10 * 102_400, "num_evals": 11}),
    "joint-servo": Renamed("fast", "joint-servo", {"num_timesteps": 20 * 102_400, "num_evals": 21}),
    "joint-30hz": Renamed("fast", "joint-30hz", {"num_timesteps": 24 * 122_880, "num_evals": 13}),
    "joint-30hz-servo": Renamed("fast", "joint-30hz-servo", {"num_timesteps": 48 * 122_880, "num_evals": 25}),
    "sac-servo": Renamed("sac", "servo"),
}
# SAC (so101_mjx.training.sac_loop): 128 worlds, 32 gradient steps of 256 transitions per env step of all
# of them (update-to-data 0.25), a prefill of 8,192 steps, then 6 epochs of 39,680 env steps with an eval
# after each. Measured: see docs/tasks.md.
_SAC = SacPreset(
    num_timesteps=6 * 40_960, num_envs=128, batch_size=256, grad_updates_per_step=32, learning_rate=1e-3,
    discounting=0.97, min_replay_size=8192, num_evals=7, policy_hidden_layer_sizes=(128, 128),
    value_hidden_layer_sizes=(128, 128), success_bonus=50.0, demo_start_prob=0.5, env_config=PICK_TRAIN_CONFIG,
)
# cpu's recipe with twice the gradient steps per env step (half the batch per update, 8 passes over
# it): 5 epochs of 102,400 env steps, an eval after each. Measured: see docs/tasks.md.
_FAST = dataclasses.replace(BLOCK_CPU_FAST, num_timesteps=5 * 102_400, num_evals=6, env_config=PICK_TRAIN_CONFIG)
PRESETS = {
    "tiny": tiny(**PICK_CONFIG),
    # 4 epochs of 532,480 env steps (a checkpoint and eval after each), half of the training
    # episodes starting along the pick-and-lift demonstrator's episodes (demo starts; evals reset
    # normally). Without demo starts the same recipe needed 9 epochs (4.79M steps) to first succeed.
    # Measured: see docs/tasks.md.
    "cpu": dataclasses.replace(BLOCK_CPU, num_timesteps=4 * 532_480, num_evals=5, env_config=PICK_TRAIN_CONFIG),
    "fast": _FAST,
    "sac": _SAC,
    "gpu": dataclasses.replace(BLOCK_GPU, num_timesteps=100_000_000, env_config=PICK_TRAIN_CONFIG),
}
