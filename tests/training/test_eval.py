"""``so101-mjx eval``: checkpoint, ONNX and .npz of one policy agree on backends c and mjx; policy checks.

One tiny Reach run (backend c, float32, a few seconds) is trained for the module; its episodes are
8 steps. Evals run in float64 (``x64=True``), where Reach's contact-free physics agrees between
backends to ~1e-14, so returns must agree to float rounding of the policy (float32 weights).
"""

import json
import shutil
from pathlib import Path

import jax
import numpy as np
import pytest
from conftest import one_error_line, train_tiny

from so101_mjx import cli
from so101_mjx.training import checkpoint
from so101_mjx.training.evaluate import evaluate
from so101_mjx.training.policy import NumpyPolicy

ENV = "SO101Reach-v0"
pytest.importorskip("onnx")


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("eval") / "run"
    train_tiny(out, "--env", ENV, "--seed", "1")
    return out


def assert_same_episodes(a: dict, b: dict) -> None:
    assert a["success"] == b["success"] and a["length"] == b["length"]
    np.testing.assert_allclose(a["returns"], b["returns"], rtol=1e-9, atol=1e-9)


# soak: the .npz equals the inference function (test_export), and the .onnx on c gives the checkpoint's episodes
# (test_onnx_on_mjx_agrees_with_checkpoint_on_c, slow)
@pytest.mark.soak
def test_checkpoint_onnx_and_npz_agree_on_c(tiny_run):
    runs = {p: evaluate(tiny_run / p, backends=("c",), episodes=16, x64=True)["backends"]["c"]
            for p in ("checkpoints", "policy.onnx", "policy.npz")}
    ckpt = runs["checkpoints"]
    assert ckpt["mean_length"] == checkpoint.read_run(checkpoint.resolve(tiny_run))["env_config"]["episode_length"] == 8
    assert np.ptp(ckpt["returns"]) > 0  # 16 different targets: a real comparison
    for other in ("policy.onnx", "policy.npz"):
        assert_same_episodes(ckpt, runs[other])


@pytest.mark.slow  # MJX compiles of the eval
@pytest.mark.optimized
def test_onnx_on_mjx_agrees_with_checkpoint_on_c(tiny_run, tmp_path, capsys):
    out = tmp_path / "eval.json"
    argv = ["eval", str(tiny_run / "policy.onnx"), "--backend", "mjx,c", "--episodes", "3", "--x64", "--json", str(out)]
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    assert "mjx: success rate" in printed and "per-episode outcome agreement mjx/c: 1.000" in printed
    result = json.loads(out.read_text())
    assert result["dtype"] == "float64" and result["agreement"] == 1.0
    on_c = evaluate(tiny_run, backends=("c",), episodes=3, x64=True)["backends"]["c"]
    assert_same_episodes(result["backends"]["mjx"], on_c)
    assert_same_episodes(result["backends"]["c"], on_c)


def test_float32_eval(tiny_run):
    result = evaluate(tiny_run / "policy.npz", backends=("c",), episodes=4, x64=False)
    assert result["dtype"] == "float32" and jax.config.jax_enable_x64  # restored afterwards
    assert len(result["backends"]["c"]["success"]) == 4 and np.all(np.isfinite(result["backends"]["c"]["returns"]))


def test_eval_and_replay_at_another_physics_step(tiny_run, tmp_path, capsys):
    """``--physics-dt``: a policy runs at the given physics step instead of its own (a policy trained at a coarse
    step checked at the reference's 2 ms), and both commands say the step they ran at; one that does not fit
    the policy's control period is one error line naming the field."""
    result = evaluate(tiny_run / "policy.npz", episodes=2, physics_dt=0.005)
    assert result["backends"]["c"]["physics_dt"] == result["env_config"]["physics_dt"] == 0.005  # its own is 2 ms
    capsys.readouterr()
    assert cli.main(["replay", str(tiny_run / "policy.npz"), "--episodes", "1", "--physics-dt", "0.005"]) == 0
    assert "physics step 5 ms" in capsys.readouterr().out
    assert cli.main(["eval", str(tiny_run / "policy.npz"), "--episodes", "1", "--physics-dt", "0.5"]) == 2
    one_error_line(capsys, "physics_dt (0.5) must not exceed control_dt (0.1)")
    assert cli.main(["replay", str(tiny_run / "policy.npz"), "--physics-dt", "-1"]) == 2
    assert "argument --physics-dt: expected a finite number > 0, got '-1'" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["eval", "replay"])
def test_another_env_with_the_same_obs_size_needs_force(tiny_run, command, capsys):
    """A Reach policy has PickPlace's observation size (20) but not its meaning."""
    policy = str(tiny_run / "policy.npz")
    assert cli.main([command, policy, "--env", "SO101PickPlace-v0", "--episodes", "1"]) == 2
    one_error_line(capsys, "is a SO101Reach-v0 policy", "--env SO101PickPlace-v0 differs", "--force")
    assert cli.main([command, policy, "--env", "SO101PickPlace-v0", "--episodes", "1", "--force"]) == 0
    assert "success rate" in capsys.readouterr().out


def test_stale_obs_layout_needs_force(tiny_run, tmp_path, capsys):
    policy = NumpyPolicy.load(tiny_run / "policy.npz")
    policy.metadata["obs_layout"] = "agent_pos[0:14]; environment_state[14:20] = something else"
    policy.save(tmp_path / "stale.npz")
    assert cli.main(["eval", str(tmp_path / "stale.npz"), "--episodes", "1"]) == 2
    one_error_line(capsys, "stale.npz: observation layout", "--force")


def edited_npz(tiny_run: Path, path: Path, edit) -> str:
    with np.load(tiny_run / "policy.npz") as f:
        arrays = dict(f)
    edit(arrays)
    np.savez(path, **arrays)
    return str(path)


def drop_last_layer(arrays: dict) -> None:
    last = max(int(k.removeprefix("kernel_")) for k in arrays if k.startswith("kernel_"))
    del arrays[f"kernel_{last}"], arrays[f"bias_{last}"]


def nan_weight(arrays: dict) -> None:
    arrays["kernel_0"] = arrays["kernel_0"].copy()
    arrays["kernel_0"][3, 2] = np.nan


@pytest.mark.parametrize("command", ["eval", "replay"])
@pytest.mark.parametrize(
    ("edit", "message"),
    [(drop_last_layer, "hidden layers [], but its metadata says policy_hidden_layer_sizes [8]"),
     (nan_weight, "kernel_0 holds 1 non-finite values")],
)
def test_truncated_or_nan_npz_is_refused(tiny_run, tmp_path, command, edit, message, capsys):
    # The tiny policy has one hidden layer of 8 = 2 x 4 actions: without its last layer it still runs.
    path = edited_npz(tiny_run, tmp_path / "bad.npz", edit)
    assert cli.main([command, path, "--episodes", "1"]) == 2
    one_error_line(capsys, f"{path}: {message}")


def test_nan_onnx_is_refused(tiny_run, tmp_path, capsys):
    import onnx
    from onnx import numpy_helper

    model = onnx.load(tiny_run / "policy.onnx")
    (init,) = [t for t in model.graph.initializer if t.name == "bias_1"]
    init.CopyFrom(numpy_helper.from_array(np.full(numpy_helper.to_array(init).shape, np.nan, np.float32), "bias_1"))
    onnx.save(model, tmp_path / "nan.onnx")
    for command in ("eval", "replay"):
        assert cli.main([command, str(tmp_path / "nan.onnx"), "--episodes", "1"]) == 2
        one_error_line(capsys, "nan.onnx: bias_1 holds 8 non-finite values")


def test_run_json_with_a_wrong_env_config_type_is_one_line(tiny_run, tmp_path, capsys):
    run_dir = shutil.copytree(tiny_run, tmp_path / "run")
    step_dir = checkpoint.resolve(run_dir)
    run = json.loads((step_dir / "run.json").read_text())
    (step_dir / "run.json").write_text(json.dumps({**run, "env_config": ["episode_length", 8]}))
    for argv in (["eval", str(run_dir)], ["export", str(run_dir)]):
        assert cli.main(argv) == 2
        one_error_line(capsys, "run.json: metadata field 'env_config' must be a dict, got list")
    policy = NumpyPolicy.load(tiny_run / "policy.npz")
    policy.metadata["env_config"] = "episode_length=8"
    policy.save(tmp_path / "bad_config.npz")
    assert cli.main(["replay", str(tmp_path / "bad_config.npz"), "--episodes", "1"]) == 2
    one_error_line(capsys, "bad_config.npz: metadata field 'env_config' must be a dict, got str")


@pytest.mark.parametrize(
    ("argv", "message"),
    [(["--backend", "gpu"], "--backend must be one or more of"), (["--backend", "c,c"], "--backend must be")],
)
def test_eval_user_errors_are_one_line(tiny_run, argv, message, capsys):
    assert cli.main(["eval", str(tiny_run), *argv]) == 2
    one_error_line(capsys, message)


@pytest.mark.slow
def test_eval_under_a_servo_model(tiny_run, tmp_path, capsys):
    """``--servo-model``: the policy's episodes under the given servo model (a JSON object or a .json file),
    recorded in the results; a bad field is one error line naming it."""
    plain = evaluate(tiny_run / "policy.npz", episodes=8)["backends"]["c"]
    (tmp_path / "servo.json").write_text(json.dumps({"delay_ticks": 3, "max_velocity": 0.5}))
    for spec in ('{"delay_ticks": 3, "max_velocity": 0.5}', str(tmp_path / "servo.json")):
        assert cli.main(["eval", str(tiny_run / "policy.npz"), "--episodes", "8", "--servo-model", spec,
                         "--json", str(tmp_path / "out.json")]) == 0
        result = json.loads((tmp_path / "out.json").read_text())
        assert result["env_config"]["servo_model"]["delay_ticks"] == 3
        assert result["backends"]["c"]["returns"] != plain["returns"]  # a slow, late arm: other episodes
    capsys.readouterr()
    assert cli.main(["eval", str(tiny_run / "policy.npz"), "--servo-model", '{"delay_ticks": -1}']) == 2
    err = capsys.readouterr().err  # refused while parsing: argparse's usage, then one error line
    assert "Traceback" not in err and err.strip().splitlines()[-1].endswith(
        "error: argument --servo-model: servo_model.delay_ticks must be an int >= 0 and <= 100, got -1"), err
    assert cli.main(["eval", str(tiny_run / "policy.npz"), "--servo-model", "[1]"]) == 2
    assert "argument --servo-model: must be a JSON object" in capsys.readouterr().err


@pytest.mark.slow
def test_eval_of_a_servo_trained_policy_without_its_servo_model(tiny_run, tmp_path):
    """A run trained under a servo model is evaluated under it by default, and without it with ``off``."""
    plain = evaluate(tiny_run, episodes=8)["backends"]["c"]
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    step = checkpoint.resolve(run) / "run.json"  # the metadata the policy is loaded with
    meta = json.loads(step.read_text())
    meta["env_config"]["servo_model"] = {"delay_ticks": 3, "max_velocity": 0.5}
    step.write_text(json.dumps(meta))
    own = evaluate(run, episodes=8)
    assert own["env_config"]["servo_model"]["delay_ticks"] == 3 and own["backends"]["c"]["returns"] != plain["returns"]
    off = evaluate(run, episodes=8, servo_model="off")
    assert off["env_config"]["servo_model"] is None
    assert_same_episodes(off["backends"]["c"], plain)
    assert cli.main(["eval", str(run), "--episodes", "2", "--servo-model", "off"]) == 0
