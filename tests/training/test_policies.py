"""One door for policies (so101_mjx.training.policies): every form of a trained policy loads as one Policy."""

from __future__ import annotations

import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import one_error_line

import so101_mjx
from so101_mjx import cli
from so101_mjx.errors import InputError, MissingFileError
from so101_mjx.training import distill, pixel_policy, policies
from so101_mjx.training.policy import NumpyPolicy

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

RUN = Path(__file__).resolve().parents[1] / "fixtures" / "v0.1.0" / "pick_cube_run"  # a tiny PickCube run, saved
FORMS = {"checkpoint": RUN, "onnx": RUN / "policy.onnx", "npz": RUN / "policy.npz"}
SIZE = 36  # px: the least frame the student's convolutions take


@pytest.fixture(scope="module")
def loaded() -> dict[str, policies.Policy]:
    return {form: policies.load(path) for form, path in FORMS.items()}


@pytest.fixture(scope="module")
def student_dir(tmp_path_factory) -> Path:
    """A small random PickCube student, saved as ``so101-mjx distill`` saves one, and exported."""
    out = tmp_path_factory.mktemp("distill")
    net = pixel_policy.PixelStudent(channels=(4, 6, 5), hidden=16)
    params = net.init(jax.random.PRNGKey(0), jnp.zeros((1, SIZE, SIZE, 3), jnp.uint8), jnp.zeros((1, 14)))
    params = jax.tree.map(lambda x: 3.0 * x, params)  # not saturated: the frames matter
    distill.save(out, params, {"teacher": "t.onnx", "env": "SO101PickCube-v0",
                               "env_config": {"image_obs": True, "image_size": SIZE, "episode_length": 3}})
    pixel_policy.export(out)
    return out


def test_the_public_name_is_the_one_door():
    assert so101_mjx.load_policy is policies.load and "load_policy" in so101_mjx.__all__


def test_checkpoint_onnx_and_npz_are_one_policy(loaded):
    """The same run as a checkpoint directory, its ONNX and its npz: the same metadata, env and actions."""
    for form, policy in loaded.items():
        assert policy.format == form and not policy.pixel
        described = (policy.env, policy.control_mode, policy.control_rate, policy.image_size)
        assert described == ("SO101PickCube-v0", "cartesian", 10.0, None)
        assert policy.obs_layout.startswith("agent_pos[0:14]") and "block_pos" in policy.obs_layout
        assert policy.env_for() == ("SO101PickCube-v0", loaded["checkpoint"].env_config)
    assert loaded["checkpoint"].source == RUN / "checkpoints" / "000000000256"
    assert loaded["onnx"].source == FORMS["onnx"]
    obs = np.random.default_rng(0).normal(size=(6, loaded["npz"].metadata["obs_size"])).astype(np.float32)
    want = loaded["npz"].numpy_fn(obs)
    assert np.ptp(want[:, :3]) > 0.01  # the observations matter: a real comparison
    for policy in loaded.values():
        np.testing.assert_allclose(policy.numpy_fn(obs), want, rtol=0, atol=1e-5)
        np.testing.assert_allclose(np.asarray(jax.jit(policy.jax_fn)(jnp.asarray(obs))), want, rtol=0, atol=1e-5)
    gym_obs = {"agent_pos": obs[0, :14], "environment_state": obs[0, 14:]}
    np.testing.assert_array_equal(loaded["onnx"].gym_fn(gym_obs), loaded["onnx"].numpy_fn(obs[:1])[0])


@pytest.mark.parametrize("form", [*FORMS, "pixel"])
def test_jax_fn_first_read_inside_a_trace_serves_later_traces(form, student_dir):
    """Its arrays are made eagerly: read first inside jit, it leaks no tracer into the next trace (another shape)."""
    policy = policies.load(student_dir / "student.onnx" if form == "pixel" else FORMS[form])
    if policy.pixel:
        call = jax.jit(lambda pixels, agent_pos: policy.jax_fn(pixels, agent_pos))
        for batch in (1, 2):
            out = call(jnp.zeros((batch, SIZE, SIZE, 3), jnp.uint8), jnp.zeros((batch, 14)))
            assert out.shape == (batch, 4)
        return
    size = policy.metadata["obs_size"]
    call = jax.jit(lambda obs: policy.jax_fn(obs))
    for batch in (1, 2):
        assert call(jnp.zeros((batch, size))).shape[0] == batch


def test_its_env_is_built_from_its_metadata(loaded):
    policy = loaded["onnx"]
    env = policy.make_env("c")
    assert env.name == policy.env and env.obs_size() == policy.metadata["obs_size"] and env.episode_length == 8
    assert policy.config.episode_length == 8 and policy.require_state("eval") is policy
    with pytest.raises(InputError, match=r"observations of size 17 \(SO101PickCube-v0\); SO101StackCube-v0 gives 20"):
        policy.env_for("SO101StackCube-v0", force=True)


def test_without_onnx_or_onnxruntime_the_numpy_runner_reads_it(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    policy = policies.load(FORMS["onnx"])
    assert isinstance(policy.numpy_fn, NumpyPolicy) and "onnxruntime is not installed" in capsys.readouterr().out
    monkeypatch.setitem(sys.modules, "onnx", None)
    policy = policies.load(FORMS["onnx"])
    assert (policy.format, policy.source) == ("npz", FORMS["npz"])


def test_a_pixel_student_is_recognized(student_dir, monkeypatch):
    onnx_file, npz_file = student_dir / pixel_policy.ONNX_FILE, student_dir / pixel_policy.STUDENT_FILE
    students = {"onnx": policies.load(onnx_file), "npz": policies.load(npz_file)}
    rng = np.random.default_rng(1)
    pixels = rng.integers(0, 256, (4, SIZE, SIZE, 3), dtype=np.uint8)
    agent_pos = rng.normal(size=(4, 14)).astype(np.float32)
    want = np.asarray(students["npz"].jax_fn(pixels, agent_pos))
    for form, student in students.items():
        assert student.pixel and student.format == form and student.image_size == SIZE
        assert "pixels" in student.obs_layout
        np.testing.assert_allclose(student.numpy_fn(pixels, agent_pos), want, rtol=0, atol=2e-5)  # onnxruntime, flax
        with pytest.raises(InputError, match="is a pixel policy; eval takes a state policy"):
            student.require_state("eval")
        with pytest.raises(InputError, match="runs only there"):
            student.env_for("SO101PickPlace-v0")
    # without onnxruntime the ONNX's own weights run in flax, exactly as the npz's
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    np.testing.assert_array_equal(policies.load(onnx_file).numpy_fn(pixels, agent_pos), want)
    frame = {"pixels": {"front": pixels[0]}, "agent_pos": agent_pos[0]}
    np.testing.assert_array_equal(students["npz"].gym_fn(frame), students["npz"].numpy_fn(pixels[:1], agent_pos[:1])[0])


def test_commands_that_feed_the_flat_observation_refuse_a_pixel_student(student_dir, capsys, tmp_path):
    assert cli.main(["distill", str(student_dir / pixel_policy.ONNX_FILE), "--out", str(tmp_path / "s")]) == 2
    one_error_line(capsys, "student.onnx is a pixel policy; distill's teacher takes a state policy")


@pytest.mark.slow
def test_eval_runs_a_pixel_student_on_its_frames(student_dir, capsys):
    """``so101-mjx eval student.onnx``: the student on the frames of its image env (backend c), under a visual
    randomization of the command's; the flag is refused for a state policy, which renders no frames."""
    from so101_mjx.training.evaluate import evaluate

    result = evaluate(student_dir / pixel_policy.ONNX_FILE, episodes=2, visual="wide")
    assert result["env_config"]["visual_randomization"]["noise"] > 0 and result["env_config"]["image_obs"]
    assert result["backends"]["c"]["length"] == [3, 3]  # truncated at the student's episode length
    assert (result["backends"]["c"]["physics_dt"], result["backends"]["c"]["control_dt"]) == (0.002, 0.1)  # reported
    capsys.readouterr()
    assert cli.main(["eval", str(FORMS["onnx"]), "--episodes", "1", "--visual-randomization", "wide"]) == 2
    one_error_line(capsys, "a visual randomization applies to a pixel policy's frames")


@pytest.mark.parametrize(("name", "content", "error", "message"), [
    ("missing.onnx", None, MissingFileError, "policy not found: "),
    ("missing_run", None, MissingFileError, "checkpoint not found: "),
    ("policy.pt", b"weights", InputError, "policy must be a checkpoint directory or an exported .onnx / .npz file"),
    ("policy.npz", b"not a zip", InputError, "is not an exported so101_mjx policy (.npz)"),
    ("policy.onnx", b"not onnx", InputError, "is not an exported so101_mjx ONNX file"),
    ("empty_run", b"", InputError, "no complete checkpoint under"),
])
def test_a_bad_path_fails_in_one_line(tmp_path, name, content, error, message, capsys):
    path = tmp_path / name
    if name == "empty_run":
        path.mkdir()
    elif content is not None:
        path.write_bytes(content)
    with pytest.raises(error) as caught:
        policies.load(path)
    assert message in str(caught.value) and "\n" not in str(caught.value)
    assert cli.main(["replay", str(path), "--episodes", "1"]) == 2
    one_error_line(capsys, message)
