"""``so101-mjx evaluate``: a policy over a suite of conditions, its cells paired episode by episode."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import one_error_line

from so101_mjx import cli
from so101_mjx.envs import make
from so101_mjx.errors import InputError
from so101_mjx.training import evaluate, suites

RUN = Path(__file__).resolve().parents[1] / "fixtures" / "v0.1.0" / "pick_cube_run"  # a tiny PickCube run, saved
POLICY = RUN / "policy.npz"
EPISODES = 8


@pytest.fixture(scope="module")
def result():
    spec = {"episodes": EPISODES, "conditions": ["nominal", "latency+2", "friction-0.5x"]}
    return suites.run_suite(POLICY, spec, seed=4, progress=lambda line: None)


@pytest.mark.slow
def test_the_nominal_cell_is_eval_on_the_same_seeds(result):
    nominal = next(row for row in result["cells"] if row["condition"] == "nominal")
    ran = evaluate.evaluate(POLICY, episodes=EPISODES, seed=4)["backends"]["c"]
    assert nominal["success"] == ran["success"] and nominal["mean_length"] == pytest.approx(ran["mean_length"])
    low, high = nominal["wilson95"]
    assert low <= nominal["rate"] <= high


@pytest.mark.slow
def test_a_policy_compared_with_itself_differs_nowhere(result):
    for row in suites.compare(result, result):
        assert row["difference"] == 0 and row["p_value"] == 1.0 and row["verdict"].startswith("no difference")


@pytest.mark.parametrize("control_mode, pixels", [("cartesian", False), ("joint", False), ("joint", True)])
def test_every_condition_makes_a_valid_env(control_mode, pixels):
    base = {"control_mode": control_mode, "servo_model": {"ranges": {"delay_ticks": (0, 1)}}}
    if pixels:  # a two-camera student's config, its wrist camera one tick late
        base |= {"image_obs": True, "image_size": 36, "image_cameras": ["front", "wrist"],
                 "visual_randomization": {"colour_shift": 0.1}, "camera_specs": {"wrist": {"fovy": 60.0, "latency": 1}}}
    for name, change in suites.CONDITIONS.items():
        overrides = change(base)
        if overrides is None:
            assert ((name.startswith("calibration") and control_mode == "cartesian")
                    or ((name.startswith("visual") or name.startswith("frame")) and not pixels))
            continue
        make("SO101PickCube-v0", "c", **{**base, **overrides})  # InputError for a field the env refuses
    if pixels:
        specs = suites.CONDITIONS["frame-latency+1"](base)["camera_specs"]
        assert specs["wrist"] == {"fovy": 60.0, "latency": 2} and specs["front"]["latency"] == 1
        assert suites.CONDITIONS["visual-off"](base) == {"visual_randomization": None}
        assert suites.CONDITIONS["visual-wide"](base)["visual_randomization"]["noise"] > 0
    latency = suites.CONDITIONS["latency+2"](base)["servo_model"]["ranges"]["delay_ticks"]
    assert latency == (2, 3)
    assert suites.CONDITIONS["latency+1"]({})["servo_model"]["delay_ticks"] == 1


@pytest.mark.parametrize("spec, needle", [
    ("huge", "unknown suite 'huge'"),
    ({"conditions": ["nominal", "moon-gravity"]}, "unknown condition 'moon-gravity'"),
    ({"episodes": 0, "conditions": []}, "episodes must be an integer >= 1"),
    ({"conditions": [{"name": "x"}]}, "a condition is a name or"),
    ({"cells": []}, "a suite is"),
])
def test_a_bad_suite_is_refused_naming_what(spec, needle):
    with pytest.raises(InputError, match=needle):
        suites.suite(spec)


@pytest.mark.slow
def test_the_command_writes_the_table_and_refuses_a_bad_suite_in_one_line(tmp_path, capsys):
    suite = tmp_path / "suite.json"
    suite.write_text(json.dumps({"episodes": 4, "conditions": ["nominal", {"name": "heavy", "env_config": {
        "randomization": {"block_mass": [3.0, 3.0]}}}]}))
    out = tmp_path / "res"
    assert cli.main(["evaluate", str(POLICY), "--suite", str(suite), "--out", str(out), "--compare",
                     str(RUN / "policy.onnx")]) == 0
    table = (tmp_path / "res.md").read_text()
    assert "| nominal |" in table and "| heavy |" in table and "McNemar" in table
    saved = json.loads((tmp_path / "res.json").read_text())
    assert [c["condition"] for c in saved["cells"]] == ["nominal", "heavy"]
    assert all(row["difference"] == 0 for row in saved["comparison"])  # the .npz and .onnx: one policy
    capsys.readouterr()
    suite.write_text(json.dumps({"conditions": ["nominal", "moon-gravity"]}))
    assert cli.main(["evaluate", str(POLICY), "--suite", str(suite), "--out", str(out)]) == 2
    one_error_line(capsys, "unknown condition 'moon-gravity'")
