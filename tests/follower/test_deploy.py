"""so101-mjx deploy (issue 33, item 3) against the simulated follower: the observation it builds, the
actions it sends, its log, and its refusals (nothing sent, nothing half-written)."""

import contextlib
import dataclasses
import io
import json
from pathlib import Path

import numpy as np
import pytest
from conftest import train_tiny

from so101_mjx import cli
from so101_mjx.data import dataset_check
from so101_mjx.envs.arm import JointMode
from so101_mjx.follower import deploy as deploy_module
from so101_mjx.follower.deploy import check_start, deploy, plan

ENV = "SO101Reach-v0"


@pytest.fixture(scope="module")
def joint_run(tmp_path_factory) -> tuple[Path, str]:
    """The tiny Reach preset in joint mode (its joint variant), trained and exported (relative targets, degrees,
    30 Hz): the run's directory and what train printed."""
    out = tmp_path_factory.mktemp("deploy") / "run"
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        train_tiny(out, "--env", ENV, "--env-config", "joint")
    return out, printed.getvalue()


@pytest.fixture(scope="module")
def joint_policy(joint_run) -> Path:
    return joint_run[0] / "policy.onnx"


@pytest.mark.slow
def test_the_run_records_its_variant(joint_run):
    """``train --env-config joint`` (the run deploy takes here): run.json and train's header name the variant."""
    run = json.loads((joint_run[0] / "run.json").read_text())
    assert run["env_variant"] == "joint" and run["env_config"]["control_mode"] == "joint"
    assert "env-config=joint" in joint_run[1]


@pytest.fixture
def cartesian_policy() -> Path:
    return Path(__file__).parents[1] / "fixtures" / "v0.1.0" / "pick_cube_run" / "policy.onnx"


def test_plan_reads_the_policys_mode_and_rate(joint_policy):
    p = plan(joint_policy)
    assert (p.task, p.fps, p.units, p.mode.relative, p.mode.max_relative) == (ENV, 30, "degrees", True, 3.0)
    assert p.image_size is None and p.episode_steps == 8  # the tiny preset's episode length


def test_deploy_on_the_simulator_equals_the_gym_env_and_logs_a_dataset(joint_policy, tmp_path):
    """Two episodes on so101_mjx: each action is the policy's on the observation built from the robot's,
    and the logged states and actions are those of the gym env run with the same policy and seeds."""
    import gymnasium as gym

    import so101_mjx.gym  # noqa: F401
    from so101_mjx.training import policies

    result = deploy(joint_policy, "so101_mjx", episodes=2, dataset=str(tmp_path / "log"), seed=5)
    assert result["episodes"] == 2 and result["stopped"] == "done" and 0 <= result["success_rate"] <= 1
    info = dataset_check.check(tmp_path / "log")
    assert info["total_episodes"] == 2 and info["fps"] == 30 and info["robot_type"] == "so101_mjx"
    names = ["shoulder_pan.pos", "shoulder_lift.pos", "elbow_flex.pos", "wrist_flex.pos",
             "wrist_roll.pos", "gripper.pos"]
    assert info["features"]["observation.state"]["names"] == info["features"]["action"]["names"] == names
    import pyarrow.parquet as pq
    table = pq.read_table(next((tmp_path / "log" / "data").rglob("*.parquet"))).to_pydict()
    policy = policies.load(joint_policy)
    act, env = policy.gym_fn, gym.make(f"so101_mjx/{policy.env}", **policy.env_config)
    obs, _ = env.reset(seed=5)
    state0 = np.asarray(table["observation.state"][0])
    np.testing.assert_allclose(state0, obs["agent_pos"], atol=1e-4)
    offsets = act(obs)
    expected = np.clip(obs["agent_pos"] + np.clip(offsets, -3, 3), *plan(joint_policy).limits.T)
    np.testing.assert_allclose(np.asarray(table["action"][0]), expected, atol=1e-3)
    env.close()


def test_refusals_name_the_problem_and_send_nothing(joint_policy, capsys):
    p = plan(joint_policy)
    with pytest.raises(ValueError, match="state policy of SO101Reach-v0"):
        deploy_module.make_robot("so101_follower", p, port="/dev/ttyACM0")
    with pytest.raises(ValueError, match="^robot_type must be one of"):
        deploy_module.make_robot("so100", p)
    with pytest.raises(ValueError, match="max_relative_target"):
        deploy_module.make_robot("so101_mjx", p, max_relative_target=-2.0)
    start = np.zeros(6)
    with pytest.raises(ValueError, match=r"elbow_flex.pos at 30.0, start 0.0"):
        check_start(np.asarray([0, 0, 30.0, 0, 0, 50]), start, 10.0, "degrees")
    check_start(np.asarray([5.0, -5, 0, 0, 0, 90]), start, 10.0, "degrees")  # the gripper may be anywhere
    # through the CLI: one line, exit 2
    assert (cli.main(["deploy", str(joint_policy), "--robot.type", "so101_follower", "--robot.port",
                      "/dev/ttyACM0"]) == 2)
    assert "state policy" in capsys.readouterr().err


@pytest.mark.slow
def test_a_cartesian_policy_runs_through_the_host_ik(cartesian_policy, tmp_path):
    """The 0.1.0 PickCube policy ([dx, dy, dz, grasp] at 10 Hz): deploy runs it at its rate through
    CartesianAdapter and logs the follower's measured motors and the targets sent."""
    p = plan(cartesian_policy)
    assert p.mode is None and p.adapter is not None and (p.fps, p.units) == (10, "degrees")
    result = deploy(cartesian_policy, "so101_mjx", episodes=2, dataset=str(tmp_path / "log"))
    assert result["episodes"] == 2 and result["stopped"] == "done"
    info = dataset_check.check(tmp_path / "log")
    assert info["fps"] == 10 and info["features"]["action"]["shape"] == [6] and info["total_frames"] == 16


def test_a_port_that_does_not_exist_is_refused(tmp_path):
    p = deploy_module.Plan("pixel.onnx", None, ENV, JointMode(), 30, 50, 64, {}, np.zeros((6, 2)))
    with pytest.raises(ValueError, match="^port /dev/ttyNONE does not exist"):
        deploy_module.make_robot("so101_follower", p, port="/dev/ttyNONE", front_camera="0")
    with pytest.raises(ValueError, match="^port is required with robot_type so101_follower"):
        deploy_module.make_robot("so101_follower", p, front_camera="0")


def test_a_non_finite_policy_output_stops_before_sending(joint_policy, monkeypatch, tmp_path):
    p = plan(joint_policy)
    bad = dataclasses.replace(p, act=lambda obs: np.full(6, np.nan))
    monkeypatch.setattr(deploy_module, "plan", lambda path: bad)
    sent = []
    original = deploy_module.SimFollower.send_action
    monkeypatch.setattr(deploy_module.SimFollower, "send_action", lambda self, a: sent.append(a) or original(self, a))
    with pytest.raises(RuntimeError, match="not 6 finite values; nothing of it was sent"):
        deploy(joint_policy, "so101_mjx")
    assert sent == []


def test_time_limit_and_dry_run(joint_policy, monkeypatch):
    sent = []
    original = deploy_module.SimFollower.send_action
    monkeypatch.setattr(deploy_module.SimFollower, "send_action", lambda self, a: sent.append(a) or original(self, a))
    result = deploy(joint_policy, "so101_mjx", episodes=3, dry_run=True)
    assert result["episodes"] == 3 and sent == []
    result = deploy(joint_policy, "so101_mjx", episodes=100, time_limit_s=1e-3)
    assert result["stopped"] == "time limit" and result["episodes"] == 1 and len(sent) == 1
    assert json.dumps(result)


def test_record_logs_the_absolute_targets_a_follower_is_sent(joint_policy, tmp_path):
    """so101-mjx record with a relative-target joint policy writes, as deploy's log and a real follower's
    dataset do, the absolute targets sent: each offset added to the measured positions, clamped to
    ±max_relative_target and to the motors' ranges (lerobot-replay sends them as they are)."""
    import pyarrow.parquet as pq

    from so101_mjx.training import policies

    assert cli.main(["record", "--policy", str(joint_policy), "--episodes", "1", "--out", str(tmp_path / "ds"),
                     "--no-video"]) == 0
    table = pq.read_table(next((tmp_path / "ds" / "data").rglob("*.parquet"))).to_pydict()
    state, env_state, action = (np.asarray(table[k])
                                for k in ("observation.state", "observation.environment_state", "action"))
    act = policies.load(joint_policy).gym_fn
    offsets = np.stack([act({"agent_pos": s, "environment_state": e}) for s, e in zip(state, env_state)])
    expected = np.clip(state + np.clip(offsets, -3, 3), *plan(joint_policy).limits.T)
    assert np.abs(offsets).max() > 1  # the policy moves: offsets and targets differ
    np.testing.assert_allclose(action, expected, atol=1e-3)


@pytest.mark.slow
def test_a_calibrated_policy_runs_on_the_simulator_in_its_calibrations_units(tmp_path):
    """A joint-mode policy trained under a follower's calibration: its plan keeps the calibration, the
    simulated follower speaks that arm's units (the start pose is the reset's angles in them), and
    deploy runs it."""
    from so101_mjx.envs import make
    from so101_mjx.robot import motors
    from so101_mjx.robot.calibration import load_calibration
    from tests.robot.test_calibration import FILE

    path = tmp_path / "follower.json"
    path.write_text(json.dumps(FILE))
    config = {"control_mode": "joint", "relative_joint_targets": True, "max_relative_target": 3.0,
              "calibration": str(path)}
    train_tiny(tmp_path / "run", "--env", ENV, "--env-config", json.dumps(config))
    p = plan(tmp_path / "run" / "policy.onnx")
    calibration = load_calibration(path)
    assert p.calibration == calibration
    nominal = dataclasses.replace(p, mode=dataclasses.replace(p.mode, calibration=None))
    start, start_nominal = deploy_module.start_pose(p), deploy_module.start_pose(nominal)
    ranges = motors.joint_ranges(make(ENV, "c").mj_model)
    np.testing.assert_allclose(motors.from_motor(start, ranges, "degrees", calibration),
                               motors.from_motor(start_nominal, ranges, "degrees"), atol=1e-6)
    assert np.abs(start - start_nominal).max() > 1.0  # the calibrated arm's degrees differ from the nominal ones
    result = deploy(tmp_path / "run" / "policy.onnx", "so101_mjx", episodes=1, seed=2)
    assert result["episodes"] == 1 and result["stopped"] == "done"


def test_deploy_on_an_arm_of_another_calibration_sends_the_same_angles(joint_policy, tmp_path):
    """``deploy --calibration FILE``: a policy of the nominal units on a follower calibrated otherwise. Readings and
    targets are converted through the joint angles, so the arm moves as it does in the policy's own units: the
    logged states, read back as angles, are those of the run without the conversion."""
    import pyarrow.parquet as pq

    from so101_mjx.envs import make
    from so101_mjx.robot import motors
    from so101_mjx.robot.calibration import load_calibration
    from tests.robot.test_calibration import FILE

    path = tmp_path / "other_arm.json"
    path.write_text(json.dumps(FILE))
    ranges = motors.joint_ranges(make(ENV, "c").mj_model)
    angles = {}
    for name, calibration in (("own", None), ("other", str(path))):
        result = deploy(joint_policy, "so101_mjx", episodes=1, seed=3, dataset=str(tmp_path / name),
                        calibration=calibration)
        assert result["episodes"] == 1 and result["stopped"] == "done"
        states = np.asarray(pq.read_table(next((tmp_path / name / "data").rglob("*.parquet")))["observation.state"]
                            .to_pylist())
        angles[name] = motors.from_motor(states, ranges, "degrees", calibration and load_calibration(path))
        if calibration:
            # the other arm's units
            assert np.abs(states - motors.to_motor(angles["own"], ranges, "degrees")).max() > 1.0
    np.testing.assert_allclose(angles["other"], angles["own"], atol=1e-4)
    p = plan(joint_policy).for_arm(str(path))
    values = np.asarray([10.0, -20.0, 30.0, 5.0, -40.0, 50.0])
    np.testing.assert_allclose(p.to_policy(p.to_arm(values)), values, atol=1e-9)
    np.testing.assert_allclose(p.limits, motors.motor_limits(ranges, "degrees", load_calibration(path)))
