"""Joint mode: actions are the real follower's six motor targets in lerobot's units (envs.arm, robot.motors)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from so101_mjx.envs import make
from so101_mjx.envs.rollout import run_episodes
from so101_mjx.errors import InputError
from so101_mjx.robot import motors
from so101_mjx.training.brax_env import action_map

NAME = "SO101PickCube-v0"


@pytest.fixture(scope="module")
def env():
    return make(NAME, "c", control_mode="joint")


@pytest.fixture(scope="module")
def step(env):
    return jax.jit(env.step)


def _ctrl_in_units(env, s) -> np.ndarray:
    arm = env.arm
    ctrl = np.concatenate([np.asarray(s.physics.ctrl)[arm.actuator_ids], [float(s.physics.ctrl[arm.gripper_actuator])]])
    return np.asarray(motors.to_motor(jnp.asarray(ctrl), arm.motor_ranges, arm.joint_mode.units))


def test_motor_units_follow_lerobots_norm_modes(env):
    """DEGREES: degrees from the range's middle; RANGE_M100_100: the range onto [-100, 100];
    the gripper's RANGE_0_100: the range onto [0, 100]."""
    ranges = env.arm.motor_ranges
    lower, upper, mid = ranges[:, 0], ranges[:, 1], ranges.mean(axis=1)
    for q, deg, pct in ((mid, 0.0, 0.0), (lower, (lower - mid) * 180 / np.pi, -100.0),
                        (upper, (upper - mid) * 180 / np.pi, 100.0)):
        degrees = np.asarray(motors.to_motor(jnp.asarray(q), ranges, "degrees"))
        percent = np.asarray(motors.to_motor(jnp.asarray(q), ranges, "range_m100_100"))
        np.testing.assert_allclose(degrees[:5], np.broadcast_to(deg, 6)[:5], atol=1e-12)
        np.testing.assert_allclose(percent[:5], pct, atol=1e-12)
    gripper = [float(motors.to_motor(jnp.asarray(q), ranges, "degrees")[5]) for q in (lower, upper)]
    np.testing.assert_allclose(gripper, [0.0, 100.0], atol=1e-12)
    q = jnp.asarray(np.random.default_rng(0).uniform(lower, upper, (32, 6)))
    for units in motors.JOINT_UNITS:
        np.testing.assert_allclose(motors.from_motor(motors.to_motor(q, ranges, units), ranges, units), q, atol=1e-12)
        host = np.asarray(q, np.float64)  # numpy stays numpy, in float64 whatever JAX's precision
        assert (type(motors.to_motor(host, ranges, units)) is np.ndarray
                and motors.to_motor(host, ranges, units).dtype == np.float64)
        np.testing.assert_allclose(motors.to_motor(host, ranges, units),
                                   np.asarray(motors.to_motor(q, ranges, units)), rtol=1e-6)
        np.testing.assert_allclose(motors.from_motor(motors.to_motor(host, ranges, units), ranges, units), host,
                                   rtol=0, atol=1e-13)
    np.testing.assert_allclose(motors.motor_limits(ranges, "range_m100_100")[:5], [[-100, 100]] * 5, atol=1e-12)
    with pytest.raises(InputError, match="joint_units must be one of"):
        motors.to_motor(q, ranges, "radians")


def test_joint_mode_runs_at_30_hz_with_six_motor_actions(env):
    assert env.config.control_dt == pytest.approx(1 / 30) and env.config.physics_dt == pytest.approx(1 / 480)
    assert env.n_substeps == 16 and env.action_size == 6 and env.agent_pos_size == 6
    assert list(env.observation_slices()) == ["motor_pos", "block_pos"] and env.obs_size() == 9
    s = env.reset(jax.random.PRNGKey(0))
    np.testing.assert_allclose(s.obs[:6], env.arm.motor_positions(s.physics), atol=0)
    assert make(NAME, "c").config.control_dt == 0.1  # the reference's rate stays the Cartesian default
    rate = make(NAME, "c", control_mode="joint", control_dt=0.05, physics_dt=0.002)
    assert rate.n_substeps == 25


@pytest.mark.parametrize("options, words", [
    ({"control_mode": "velocity"}, "control_mode must be one of"),
    ({"control_mode": "joint", "physics_dt": 0.002}, "must divide the physics rate"),
    ({"control_mode": "joint", "joint_units": "radians"}, "joint_units must be one of"),
    ({"control_mode": "joint", "max_relative_target": -1.0}, "max_relative_target"),
    ({"control_mode": "joint", "relative_joint_targets": "yes"}, "relative_joint_targets"),
    ({"relative_joint_targets": True}, "apply to control_mode='joint' only"),
    ({"max_relative_target": 5.0}, "apply to control_mode='joint' only"),
])
def test_bad_joint_mode_config_names_the_field(options, words):
    with pytest.raises(InputError, match=words):
        make(NAME, "c", **options)


def test_an_absolute_target_is_reached(env, step):
    """shoulder_pan (vertical axis, no gravity load) settles on a 30° target; the gripper opens to 80."""
    s = env.reset(jax.random.PRNGKey(0))
    target = np.asarray(s.obs[:6]).copy()
    target[0], target[5] = 30.0, 80.0
    for _ in range(30):
        s = step(s, jnp.asarray(target))
    np.testing.assert_allclose(_ctrl_in_units(env, s)[[0, 5]], [30.0, 80.0], atol=1e-9)
    assert abs(float(s.obs[0]) - 30.0) < 1.0 and abs(float(s.obs[5]) - 80.0) < 5.0


def test_relative_targets_and_the_max_relative_clamp():
    """Relative: target = measured + action; max_relative_target bounds |target - measured| (lerobot's
    ensure_safe_goal_position), also for absolute targets."""
    rel = make(NAME, "c", control_mode="joint", relative_joint_targets=True)
    s = rel.reset(jax.random.PRNGKey(0))
    action = jnp.asarray([5.0, 0.0, 0.0, 0.0, 0.0, 10.0])
    s1 = rel.step(s, action)
    np.testing.assert_allclose(_ctrl_in_units(rel, s1), np.asarray(s.obs[:6]) + np.asarray(action), atol=1e-9)
    clamped = make(NAME, "c", control_mode="joint", max_relative_target=2.0)
    s = clamped.reset(jax.random.PRNGKey(0))
    s1 = clamped.step(s, jnp.asarray([40.0, -40.0, 0.0, 0.0, 0.0, 50.0]))
    expected = np.asarray(s.obs[:6]) + np.clip(np.asarray([40.0, -40.0, 0, 0, 0, 50.0]) - np.asarray(s.obs[:6]), -2, 2)
    np.testing.assert_allclose(_ctrl_in_units(clamped, s1), expected, atol=1e-9)


def test_a_nonfinite_entry_keeps_that_motors_target(env, step):
    s = env.reset(jax.random.PRNGKey(0))
    before = _ctrl_in_units(env, s)
    s1 = step(s, jnp.asarray([np.nan, 10.0, 0.0, 0.0, np.inf, 50.0]))
    after = _ctrl_in_units(env, s1)
    np.testing.assert_allclose(after[[0, 4]], before[[0, 4]], atol=1e-9)
    np.testing.assert_allclose(after[[1, 5]], [10.0, 50.0], atol=1e-9)
    assert float(s1.metrics["nonfinite_actions"]) == 1.0 and bool(jnp.all(jnp.isfinite(s1.physics.qpos)))


def test_a_cartesian_action_is_refused_by_shape(env):
    s = env.reset(jax.random.PRNGKey(0))
    with pytest.raises(InputError, match=r"action must have shape \(6,\)"):
        env.step(s, jnp.zeros(4))


def test_the_training_action_map_spans_the_motor_limits(env):
    scale, offset = action_map(env)
    low, high = env.arm.action_bounds()
    np.testing.assert_allclose(offset - scale, low, rtol=1e-6)
    np.testing.assert_allclose(offset + scale, high, rtol=1e-6)
    np.testing.assert_allclose(action_map(make(NAME, "c"))[0], [1, 1, 1, 0.5])
    rel_low, rel_high = make(NAME, "c", control_mode="joint", relative_joint_targets=True,
                             max_relative_target=3.0).arm.action_bounds()
    np.testing.assert_allclose(rel_high, 3.0) and np.testing.assert_allclose(rel_low, -3.0)


@pytest.mark.parametrize("control_dt, steps", [(0.1, 100), (1 / 30, 300)])
@pytest.mark.slow
def test_pick_cube_demonstrator_lifts_in_joint_mode(control_dt, steps):
    """The demonstrator (PickCube's pick and lift, the training presets' demonstration starts) in joint
    mode, its IK target kept from step to step: it lifts as in the Cartesian mode, at 10 Hz and at 30 Hz."""
    env = make(NAME, "c", control_mode="joint", control_dt=control_dt, physics_dt=0.002 if control_dt == 0.1 else None,
               relative_joint_targets=True, max_relative_target=10.0, top_down_ik=True, jaw_pads=True,
               random_block_position=True, action_scale=0.04, episode_length=steps)
    out = run_episodes(env, "demonstrator", jax.random.PRNGKey(3), 8, stop_when_done=True)
    assert float(np.mean(out["success"])) >= 0.5, out["length"]


@pytest.mark.slow
def test_scripted_controllers_drive_joint_mode_through_the_ik():
    """The Cartesian controller's actions become joint targets (SO101Arm.cartesian_as_joint): PickPlace's
    scripted controller still places the block at 30 Hz."""
    env = make("SO101PickPlace-v0", "c", control_mode="joint", top_down_ik=True, jaw_pads=True, action_scale=0.025,
               episode_length=260)
    out = run_episodes(env, "scripted", jax.random.PRNGKey(0), 4, stop_when_done=True)
    assert bool(np.all(out["success"])), out["length"]


@pytest.mark.slow
@pytest.mark.optimized
def test_joint_mode_is_the_same_on_both_backends():
    """A scripted joint trajectory (every motor, clear of the block) gives the same states on c and mjx:
    float64, 100 control steps, ≤ 1e-9 in every qpos, ctrl and observation entry and in the arm's
    velocities. The block resting on the table is the exception in velocity: the two contact solvers
    leave it with speeds that differ by up to 8e-9 m/s (measured), held here to 1e-8."""
    c_env, m_env = (make(NAME, b, control_mode="joint") for b in ("c", "mjx"))
    t = np.arange(100)[:, None] / 30.0
    amplitude = np.asarray([30, 15, 15, 30, 60])  # degrees around home: the jaw stays clear of the block
    actions = np.concatenate([amplitude * np.sin(np.pi * t + np.arange(5)), 50 + 40 * np.sin(np.pi * t)], axis=1)

    def roll(env):
        s = env.reset(jax.random.PRNGKey(3))
        return jax.lax.scan(lambda s, a: (env.step(s, a),) * 2, s, jnp.asarray(actions))[1]

    c, m = jax.jit(lambda: roll(c_env))(), jax.jit(lambda: roll(m_env))()
    assert np.ptp(np.asarray(c.obs)[:, :5], axis=0).min() > 25  # every arm motor moved
    for field in ("qpos", "ctrl"):
        np.testing.assert_allclose(getattr(m.physics, field), getattr(c.physics, field), rtol=0,
                                   atol=1e-9, err_msg=field)
    np.testing.assert_allclose(m.obs, c.obs, rtol=0, atol=1e-9)
    arm = [*c_env.arm.dof_ids, c_env.mj_model.joint("gripper").dofadr[0]]
    np.testing.assert_allclose(m.physics.qvel[:, arm], c.physics.qvel[:, arm], rtol=0, atol=1e-9)
    np.testing.assert_allclose(m.physics.qvel, c.physics.qvel, rtol=0, atol=1e-8)


def test_the_gym_env_takes_joint_mode():
    """so101_mjx/<task> with control_mode='joint': a 6-motor action space in motor units and agent_pos (6,)."""
    import gymnasium

    import so101_mjx.gym  # noqa: F401  (registers the ids)

    env = gymnasium.make(f"so101_mjx/{NAME}", control_mode="joint")
    obs, _ = env.reset(seed=0)
    assert env.action_space.shape == (6,) and obs["agent_pos"].shape == (6,)
    assert env.unwrapped.control_dt == pytest.approx(1 / 30)  # the mode's default rate, as make's
    np.testing.assert_allclose(env.action_space.high[[0, 5]], [110.0, 100.0], atol=1e-3)
    target = obs["agent_pos"].copy()
    target[0] = 20.0
    for _ in range(20):
        obs, *_ = env.step(target)
    assert abs(obs["agent_pos"][0] - 20.0) < 1.0
    with pytest.raises(ValueError, match=r"action must have shape \(6,\)"):
        env.step(np.zeros(4))
    env.close()


@pytest.mark.slow
def test_a_joint_mode_recording_has_the_followers_features(tmp_path):
    """record --control-mode joint: observation.state and action named as so101_follower's ('<motor>.pos')."""
    import json

    from so101_mjx.data.record import record

    r = record("SO101PickPlace-v0", "scripted", 1, tmp_path / "ds", "c", image_size=None, num_envs=1,
               config={"control_mode": "joint", "episode_length": 20})
    assert r["kept"] == 1
    info = json.loads((tmp_path / "ds" / "meta" / "info.json").read_text())
    names = [f"{m}.pos" for m in motors.MOTORS]
    assert info["features"]["observation.state"]["names"] == names and info["features"]["action"]["names"] == names
    assert info["fps"] == 30
