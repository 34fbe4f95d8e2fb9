"""ONNX and numpy exports equal Brax's JAX inference function; corrupt files give one error line."""

import json
import subprocess
import sys

import jax
import numpy as np
import pytest
from brax.training.acme import running_statistics, specs

from so101_mjx import cli
from so101_mjx.envs import make
from so101_mjx.training import checkpoint, networks, ppo, presets
from so101_mjx.training.export import NumpyPolicy, export
from so101_mjx.training.onnx_graph import OPSET

ENV = "SO101Reach-v0"
onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A checkpoint with random (untrained) params and a non-trivial observation normalizer."""
    preset = presets.preset(ENV)
    env = make(ENV, backend="c", **preset.env_overrides())
    run = ppo.run_metadata(ENV, presets.DEFAULT_PRESET[ENV], preset, env, seed=0)
    network = networks.network_factory(**run["network"])(run["obs_size"], run["action_size"])
    k_policy, k_value, k_obs = jax.random.split(jax.random.PRNGKey(1), 3)
    normalizer = running_statistics.init_state(specs.Array((run["obs_size"],), np.float32))
    scales = np.geomspace(0.01, 3.0, run["obs_size"]).astype(np.float32)
    batch = np.asarray(jax.random.normal(k_obs, (512, run["obs_size"]), np.float32)) * scales + 0.2
    normalizer = running_statistics.update(normalizer, batch)
    params = (normalizer, network.policy_network.init(k_policy), network.value_network.init(k_value))
    out = tmp_path_factory.mktemp("export")
    step_dir = checkpoint.save(out, 1000, params, run)
    onnx_path, npz_path = export(out, out / "policy.onnx")
    return step_dir, onnx_path, npz_path, scales


def test_onnx_and_numpy_equal_the_jax_inference_function(saved):
    step_dir, onnx_path, npz_path, scales = saved
    run, params = checkpoint.load(step_dir)
    obs = (np.random.default_rng(0).normal(size=(10_000, run["obs_size"])) * 3 * scales).astype(np.float32)
    expected = np.asarray(checkpoint.inference_fn(run, params)(obs))
    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    from_onnx = session.run(["actions"], {"obs": obs})[0]
    from_numpy = NumpyPolicy.load(npz_path)(obs)
    assert expected.shape == from_onnx.shape == from_numpy.shape == (10_000, 4)
    assert np.ptp(expected, axis=0).min() > 0.1  # the check is not vacuous: actions vary
    np.testing.assert_allclose(from_onnx, expected, rtol=0, atol=1e-5)
    np.testing.assert_allclose(from_numpy, expected, rtol=0, atol=1e-5)
    assert np.all(np.abs(expected[:, :3]) <= 1) and np.all((expected[:, 3] >= 0) & (expected[:, 3] <= 1))


def test_onnx_interface_and_metadata(saved):
    step_dir, onnx_path, npz_path, _ = saved
    model = onnx.load(onnx_path)
    onnx.checker.check_model(model)
    assert max(o.version for o in model.opset_import if o.domain in ("", "ai.onnx")) >= OPSET
    (inp,), (out,) = model.graph.input, model.graph.output
    assert inp.name == "obs" and [d.dim_value for d in inp.type.tensor_type.shape.dim][1] == 20
    assert out.name == "actions" and inp.type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    meta = json.loads({p.key: p.value for p in model.metadata_props}["so101_mjx"])
    assert meta["env"] == ENV and meta["env_config"] == checkpoint.read_run(step_dir)["env_config"]
    assert meta["env_config"]["action_scale"] > 0
    assert "agent_pos" in meta["obs_layout"] and meta["version"]
    assert NumpyPolicy.load(npz_path).metadata == meta


@pytest.mark.parametrize("suffix", [".onnx", ".npz"])
def test_corrupt_policy_file_is_one_error_line(tmp_path, suffix, capsys):
    bad = tmp_path / f"policy{suffix}"
    bad.write_bytes(b"this is not a policy")
    assert cli.main(["replay", str(bad), "--episodes", "1"]) == 2
    err = capsys.readouterr().err
    assert "is not an exported so101_mjx" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_numpy_runner_needs_no_jax(saved):
    _, _, npz_path, _ = saved
    code = (
        "import sys\n"
        "for m in ('jax', 'jaxlib', 'brax', 'flax', 'mujoco', 'onnx', 'onnxruntime'): sys.modules[m] = None\n"
        "import numpy as np\n"
        "from so101_mjx.training.export import NumpyPolicy\n"
        f"policy = NumpyPolicy.load({str(npz_path)!r})\n"
        "print(policy(np.zeros((3, policy.obs_size), np.float32)).shape)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "(3, 4)"


def test_checkpoint_with_nan_weights_is_not_exported(saved, tmp_path, capsys):
    step_dir, *_ = saved
    run, (normalizer, policy, value) = checkpoint.load(step_dir)
    policy = jax.tree.map(lambda x: np.full_like(np.asarray(x), np.nan), policy)
    checkpoint.save(tmp_path, 2000, (normalizer, policy, value), run)
    assert cli.main(["export", str(tmp_path), "--out", str(tmp_path / "policy.onnx")]) == 2
    err = capsys.readouterr().err
    assert "000000002000: kernel_0 holds" in err and "non-finite values" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "policy.onnx").exists() and not (tmp_path / "policy.npz").exists()


def test_action_layout_is_the_tasks():
    from so101_mjx.training.export import metadata

    push = metadata({"env": "SO101PushCube-v0", "obs_size": 20})["action_layout"]
    assert "grasp ignored" in push and "grasp in [0, 1]" not in push
    assert "grasp in [0, 1] (0 closed)" in metadata({"env": "SO101PickCube-v0", "obs_size": 17})["action_layout"]
