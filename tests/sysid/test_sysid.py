"""so101-mjx sysid (issue 34, item 3): the excitation, replaying a recording in the batched simulator, the
fit recovering known servo parameters from a simulated recording, and the command's files and refusals."""

import json

import jax
import numpy as np
import pytest

from so101_mjx import cli, make
from so101_mjx.follower.deploy import deploy, excitation_plan
from so101_mjx.robot import motors
from so101_mjx.robot.calibration import Calibration, load_calibration
from so101_mjx.sim.servo import ServoModel
from so101_mjx.sysid import dataset, excitation, fit

TASK = "SO101Reach-v0"
# all non-default
TRUE = {"delay_ticks": 2, "backlash": 0.035, "max_velocity": 3.0, "deadband": 0.008, "kp": 24.0, "damping": 0.9}
ELBOW = motors.MOTORS.index("elbow_flex")


@pytest.fixture
def x64():
    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", previous)


def test_the_excitation_moves_one_motor_at_a_time_within_the_limits():
    ranges = motors.joint_ranges(make(TASK, "c").mj_model)
    start = np.zeros(6)
    commands = excitation.trajectory(start, ranges, 30)
    per_motor = round(excitation.duration(30) * 30)
    assert commands.shape == (6 * per_motor, 6)
    for m in range(6):
        part = commands[m * per_motor:(m + 1) * per_motor]
        others = np.delete(part, m, axis=1)
        np.testing.assert_array_equal(others, np.broadcast_to(np.delete(start, m), others.shape))  # the others hold
        assert np.ptp(part[:, m]) > 0.9 and part[-1, m] == start[m]  # moved, and back
        assert (np.all(part[:, m] >= ranges[m, 0] + excitation.MARGIN - 1e-12)
                and np.all(part[:, m] <= ranges[m, 1] - excitation.MARGIN + 1e-12))


@pytest.mark.slow
def test_the_true_parameters_replay_the_recording_exactly(x64):
    recording = fit.simulated(ServoModel(**TRUE), (ELBOW,), TASK)
    replay = fit.replayer(fit.replay_env(TASK, 30, "c"))
    candidates = {k: np.full((2, 6), v) for k, v in TRUE.items()}
    candidates["kp"][1] = 20.0
    cost = fit.cost(replay, recording, candidates)
    assert np.all(cost[0] == 0) and cost[1, ELBOW] > 1e-7


@pytest.mark.slow
@pytest.mark.optimized
def test_the_replay_is_the_same_on_c_and_mjx(x64):
    """Three candidates (delays 0-2, deadbands 0-8 mrad) replaying 3 s of the elbow's excitation: the same
    measured positions on both backends."""
    commands = excitation.trajectory(np.zeros(6), motors.joint_ranges(make(TASK, "c").mj_model), 30, (ELBOW,))[:90]
    candidates = {k: np.full((3, 6), v) for k, v in fit.DEFAULTS.items()}
    candidates["delay_ticks"] = np.arange(3)[:, None].repeat(6, 1)
    candidates["deadband"][:, ELBOW] = [0.0, 0.004, 0.008]
    c, mjx = (np.asarray(fit.replayer(fit.replay_env(TASK, 30, b))(commands, np.zeros(6), candidates))
              for b in ("c", "mjx"))
    assert np.ptp(c[:, :, ELBOW]) > 1.0 and not np.array_equal(c[0], c[2])
    np.testing.assert_allclose(mjx, c, rtol=0, atol=1e-9)


# 1 min: the accuracy of the fit; test_deploy_excitation_then_sysid... runs the command at a tiny size
@pytest.mark.slow
@pytest.mark.optimized
def test_identify_recovers_one_motors_parameters(x64):
    """Each of the six parameters within 10 % and the delay exact, from the defaults, on the elbow's excitation."""
    recording = fit.simulated(ServoModel(**TRUE), (ELBOW,), TASK)
    found = fit.identify(recording, task=TASK, backend="c", motors_fitted=(ELBOW,), population=32, iterations=8,
                         sweeps=2, polish=0)
    assert found.value["delay_ticks"][ELBOW] == TRUE["delay_ticks"]
    for name in fit.PARAMETERS[1:]:
        assert found.value[name][ELBOW] == pytest.approx(TRUE[name], rel=0.10), name
        assert found.value[name][0] == pytest.approx(fit.DEFAULTS[name])  # a motor not fitted keeps the default
    assert found.rms[ELBOW] < 0.1 * np.sqrt(np.mean(np.diff(recording.episodes[0][1][:, ELBOW]) ** 2))


@pytest.mark.slow
def test_deploy_excitation_then_sysid_writes_what_the_env_takes(tmp_path):
    """The command end to end at a tiny size: the files, not the accuracy (that is the test above)."""
    log = tmp_path / "log"
    result = deploy("excitation", "so101_mjx", episode_time_s=2.0, dataset=str(log), servo_model={"delay_ticks": 1})
    assert result["episodes"] == 1 and result["stopped"] == "done"
    recording = dataset.read(log)
    assert recording.fps == 30 and recording.episodes[0][0].shape == (60, 6)
    sent = excitation_plan().act.commands[:60]  # degrees
    ranges = motors.joint_ranges(make(TASK, "c").mj_model)
    np.testing.assert_allclose(recording.episodes[0][0],
                               np.asarray(motors.from_motor(sent, ranges, "degrees")), atol=1e-6)
    out = tmp_path / "fit.json"
    assert cli.main(["sysid", str(log), "--out", str(out), "--motors", "shoulder_pan", "--population", "4",
                     "--elites", "2", "--iterations", "1", "--sweeps", "1", "--polish", "1"]) == 0
    fields = json.loads(out.read_text())
    assert set(fields) == set(fit.PARAMETERS) and all(len(v) == 6 for v in fields.values())
    env = make(TASK, "c", control_mode="joint", servo_model=fields)
    assert env.config.servo_model.kp == tuple(fields["kp"])
    report = json.loads(out.with_suffix(".report.json").read_text())
    assert (report["motors"] == ["shoulder_pan"] and report["frames"] == 60
            and set(report["interval"]) == set(fit.PARAMETERS))


@pytest.mark.parametrize("args, message", [
    (["--motors", "elbow"], "--motors must be names of"),
    (["--elites", "80"], "elites must be at least 2 and fewer than population (64)"),
    (["--population", str(10**9)], "--population = 1000000000 needs about"),
    (["--seed", "0"], "the report beside it, '"),  # its path may be shortened in the message
])
def test_bad_options_are_refused(tmp_path, capsys, args, message):
    log = tmp_path / "log"
    deploy("excitation", "so101_mjx", episode_time_s=1.5, dataset=str(log))
    capsys.readouterr()
    if "report" in message:
        (tmp_path / "fit.report.json").mkdir()  # where the report goes: refused before the fit, not after it
    args = [a.format(tmp=tmp_path) for a in args]
    assert cli.main(["sysid", str(log), "--out", str(tmp_path / "fit.json"), *args]) == 2
    err = capsys.readouterr().err
    assert (message.format(tmp=tmp_path) in err and len(err.strip().splitlines()) == 1
            and not (tmp_path / "fit.json").exists())
    if "report" in message:
        assert "fit.report.json' is a directory" in err


def test_a_dataset_without_the_followers_features_is_refused(tmp_path):
    from so101_mjx.data.lerobot_dataset import DatasetWriter

    writer = DatasetWriter(tmp_path / "d",
                           {"observation.state": {"dtype": "float32", "shape": [2], "names": ["a", "b"]},
                                            "action": {"dtype": "float32", "shape": [2], "names": ["a", "b"]}},
                                            30, "so101_mjx")
    writer.add_episode({"observation.state": np.zeros((40, 2), np.float32),
                        "action": np.zeros((40, 2), np.float32)}, "t")
    writer.close()
    with pytest.raises(ValueError, match=r"feature 'action' lacks \['shoulder_pan.pos'"):
        dataset.read(tmp_path / "d")
    with pytest.raises(ValueError, match="no dataset"):
        dataset.read(tmp_path / "missing")


SIX = list(motors.FEATURE_NAMES)


def follower_dataset(root, action=None, feature=None, frames: int = 40):
    """A dataset of a follower's six float positions (zeros, ``action`` when given), then with the ``action``
    column of its data replaced by ``column`` and its ``info.json`` feature by ``feature`` when given."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from so101_mjx.data.lerobot_dataset import DatasetWriter

    vector = {"dtype": "float32", "shape": [6], "names": SIX}
    writer = DatasetWriter(root, {"observation.state": vector, "action": vector}, 30, "so101_mjx")
    zeros = np.zeros((frames, 6), np.float32)
    writer.add_episode({"observation.state": zeros,
                        "action": zeros if action is None or isinstance(action, pa.Array) else action}, "t")
    writer.close()
    if isinstance(action, pa.Array):
        path = next((root / "data").rglob("*.parquet"))
        table = pq.read_table(path)
        pq.write_table(table.set_column(table.schema.get_field_index("action"), "action", action), path)
    if feature is not None:
        info = json.loads((root / "meta/info.json").read_text())
        info["features"]["action"] = feature
        (root / "meta/info.json").write_text(json.dumps(info))
    return root


def _columns(values: np.ndarray):
    import pyarrow as pa

    return pa.FixedSizeListArray.from_arrays(pa.array(values.reshape(-1)), values.shape[1])


@pytest.mark.parametrize("action, feature, message", [
    (_columns(np.zeros((40, 5), np.float32)), {"dtype": "float32", "shape": [5], "names": SIX},
     "'action' is float32 of shape [5]"),
    (np.zeros(40, np.float32), {"dtype": "float32", "shape": [1], "names": SIX}, "'action' is float32 of shape [1]"),
    (_columns(np.full((40, 6), "x")), {"dtype": "string", "shape": [6], "names": SIX},
     "'action' is string of shape [6]"),
    (_columns(np.zeros((40, 5), np.float32)), None,
     "'action' holds float32 values of shape (5,) per frame; its feature says 6 numbers"),
    (_columns(np.full((40, 6), "x")), None, "'action' holds text or other non-numbers of shape (6,) per frame"),
    (np.zeros(40, np.float32), None, "'action' holds float32 values of shape () per frame"),
], ids=["5-columns", "scalar", "strings", "data-5-columns", "data-strings", "data-scalar"])
def test_features_unlike_a_followers_are_refused(tmp_path, action, feature, message):
    """Checked against the follower's features (six float positions, one per name) in info.json and in the data."""
    import pyarrow as pa

    from so101_mjx.errors import InputError

    column = action if isinstance(action, pa.Array) else pa.array(action)
    with pytest.raises(InputError) as err:
        dataset.read(follower_dataset(tmp_path / "d", column, feature))
    assert message in str(err.value)


def test_positions_outside_the_motors_ranges_are_refused_naming_the_units(tmp_path):
    """Encoder counts, or degrees read as -100..100: far outside the ranges, refused before fitting."""
    action = np.zeros((40, 6), np.float32)
    action[:, 0] = 2048.0  # shoulder_pan in encoder counts
    root = follower_dataset(tmp_path / "d", action)
    with pytest.raises(ValueError,
                       match=r"'action': shoulder_pan.pos reaches 2048, outside its range \[.*\] in degrees"):
        dataset.read(root)
    with pytest.raises(ValueError, match="in range_m100_100"):
        dataset.read(root, units="range_m100_100")
    assert dataset.RANGE_MARGIN == 0.1
    assert len(dataset.read(follower_dataset(tmp_path / "ok")).episodes) == 1  # zeros: within every range


def test_excitation_on_a_real_follower_needs_a_port_and_no_camera():
    from so101_mjx.follower.deploy import make_robot

    with pytest.raises(ValueError, match="^port is required with robot_type so101_follower"):
        make_robot("so101_follower", excitation_plan())
    with pytest.raises(ValueError, match="^servo_model applies to robot_type so101_mjx"):
        deploy("excitation", "so101_follower", servo_model={}, port="/dev/null")


PER_MOTOR = {"delay_ticks": [1, 2, 0, 3, 1, 2], "backlash": [0.03, 0.04, 0.035, 0.025, 0.03, 0.02],
             "max_velocity": [3.0, 2.5, 3.5, 4.0, 3.0, 3.5], "deadband": [0.006, 0.008, 0.01, 0.007, 0.006, 0.008],
             "kp": [22.0, 26.0, 24.0, 20.0, 18.0, 19.0], "damping": [0.8, 1.0, 0.9, 0.7, 0.7, 0.6]}


@pytest.fixture(scope="module")
def full_fit(tmp_path_factory) -> dict:
    """Full size: the excitation sent to the simulated follower under per-motor, non-default parameters,
    logged by deploy and fitted by the command with its defaults (10 to 20 min on a 2-core CPU: a soak
    run, ``-m soak``; the slow set fits one motor, test_identify_recovers_one_motors_parameters)."""
    root = tmp_path_factory.mktemp("sysid")
    log, out = root / "log", root / "fit.json"
    deploy("excitation", "so101_mjx", dataset=str(log), servo_model=PER_MOTOR)
    assert cli.main(["sysid", str(log), "--out", str(out), "--backend", "c"]) == 0
    return json.loads(out.read_text())


@pytest.mark.soak
def test_sysid_recovers_every_delay_and_the_loop_of_every_motor(full_fit):
    assert full_fit["delay_ticks"] == PER_MOTOR["delay_ticks"]
    for name in ("backlash", "max_velocity", "kp", "damping"):
        np.testing.assert_allclose(full_fit[name], PER_MOTOR[name], rtol=0.10, err_msg=name)


@pytest.mark.soak
@pytest.mark.xfail(reason="measured on a 2-core CPU, 2026-12-05: shoulder_pan's deadband 10.5 % low (0.00537 "
                          "for 0.006), the other five within 2.4 % (docs/sim2real.md)", strict=False)
def test_sysid_recovers_every_deadband(full_fit):
    np.testing.assert_allclose(full_fit["deadband"], PER_MOTOR["deadband"], rtol=0.10)


def test_sysid_reads_the_dataset_in_the_calibrated_followers_units(tmp_path, capsys):
    """``--calibration FILE``: the recording's motor values are that arm's units (robot.calibration); a bad file
    is refused while parsing, in one line naming the file, the motor and the field."""
    log = tmp_path / "log"
    deploy("excitation", "so101_mjx", episode_time_s=1.5, dataset=str(log))
    ranges = motors.joint_ranges(make(TASK, "c").mj_model)
    near = Calibration.nominal(ranges)  # an arm a few counts off the model's ranges
    data = {m: {"id": i + 1, "drive_mode": 0, "homing_offset": 0, "range_min": near.range_min[i] + 12,
                "range_max": near.range_max[i] - 7} for i, m in enumerate(motors.MOTORS)}
    path = tmp_path / "follower.json"
    path.write_text(json.dumps(data))
    calibration = load_calibration(path)
    nominal, calibrated = dataset.read(log), dataset.read(log, calibration=calibration)
    values = motors.to_motor(nominal.episodes[0][0], ranges, "degrees")  # the commands as recorded, in degrees
    expected = motors.from_motor(values, ranges, "degrees", calibration)
    np.testing.assert_allclose(calibrated.episodes[0][0], expected, rtol=0, atol=1e-9)
    assert not np.allclose(calibrated.episodes[0][0], nominal.episodes[0][0], atol=1e-3)
    out = tmp_path / "fit.json"
    assert cli.main(["sysid", str(log), "--out", str(out), "--calibration", str(path), "--motors", "wrist_roll",
                     "--population", "4", "--elites", "2", "--iterations", "1", "--sweeps", "0", "--polish", "0"]) == 0
    report = json.loads(out.with_suffix(".report.json").read_text())
    assert report["calibration"]["range_min"] == list(calibration.range_min)
    assert report["calibration"]["source"] == str(path)
    capsys.readouterr()
    path.write_text(json.dumps({**data, "gripper": {**data["gripper"], "drive_mode": 3}}))
    assert cli.main(["sysid", str(log), "--out", str(tmp_path / "again.json"), "--calibration", str(path)]) == 2
    err = capsys.readouterr().err  # argparse's usage, then one line
    assert "Traceback" not in err and err.strip().splitlines()[-1].endswith(
        f"argument --calibration: {path}: gripper.drive_mode must be 0 or 1, got 3")
