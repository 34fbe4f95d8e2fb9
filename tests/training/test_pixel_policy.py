"""The pixel student as ONNX (so101_mjx.training.pixel_policy) and its replay in the gym envs."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from so101_mjx import cli
from so101_mjx.errors import InputError
from so101_mjx.training import distill, pixel_policy, policies, replay

pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
SIZE = 36


@pytest.fixture(scope="module")
def student_dir(tmp_path_factory):
    """A small random student of PickCube at 36x36, saved as ``so101-mjx distill`` saves one."""
    out = tmp_path_factory.mktemp("distill")
    student = pixel_policy.PixelStudent(channels=(4, 6, 5), hidden=16)
    params = student.init(jax.random.PRNGKey(0), jnp.zeros((1, SIZE, SIZE, 3), jnp.uint8), jnp.zeros((1, 14)))
    params = jax.tree.map(lambda x: 3.0 * x, params)  # saturating weights would hide layout mistakes less well
    env_config = {"image_obs": True, "image_size": SIZE, "image_quality": "fast", "episode_length": 3}
    distill.save(out, params, {"teacher": "t.onnx", "env": "SO101PickCube-v0", "env_config": env_config})
    return out, student, params


def test_onnx_student_equals_the_flax_student(student_dir):
    out, student, params = student_dir
    path = pixel_policy.export(out)
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, (5, SIZE, SIZE, 3), dtype=np.uint8)
    agent_pos = rng.normal(size=(5, 14)).astype(np.float32)
    want = np.asarray(student.apply(params, pixels, agent_pos))
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = session.run(["actions"], {"pixels": pixels, "agent_pos": agent_pos})[0]
    np.testing.assert_allclose(got, want, atol=2e-5)
    assert np.ptp(want[:, :3]) > 0.1  # the pixels matter: not a constant output
    for loaded in (path, out / pixel_policy.STUDENT_FILE):  # onnxruntime, and the npz with flax
        policy = policies.load(loaded)
        np.testing.assert_allclose(policy.numpy_fn(pixels, agent_pos), want, atol=2e-5)
        meta = policy.metadata
        assert meta["kind"] == "pixel" and meta["env"] == "SO101PickCube-v0" and meta["env_config"]["image_size"] == SIZE


def test_load_tells_students_from_state_exports(student_dir, tmp_path):
    out, _, _ = student_dir
    path = pixel_policy.export(out, tmp_path / "s.onnx")
    assert policies.load(path).pixel and policies.load(out / pixel_policy.STUDENT_FILE).pixel
    (tmp_path / "junk.onnx").write_bytes(b"not onnx")
    with pytest.raises(InputError, match="junk.onnx is not an exported so101_mjx ONNX file"):
        policies.load(tmp_path / "junk.onnx")


def test_cli_export_of_a_distill_dir_writes_student_onnx(student_dir, tmp_path):
    out, _, _ = student_dir
    assert cli.main(["export", str(out), "--out", str(tmp_path / "cli.onnx")]) == 0
    assert policies.load(tmp_path / "cli.onnx").pixel


def test_unusable_distill_dirs_name_the_file(tmp_path):
    with pytest.raises(ValueError, match="student.npz is missing"):
        pixel_policy.read_run(tmp_path)
    np.savez(tmp_path / "student.npz", **{"params/Dense_0/kernel": np.full((2, 2), np.nan)})
    (tmp_path / "distill.json").write_text(json.dumps({"env": "SO101PickCube-v0", "env_config": {"image_size": 8}}))
    with pytest.raises(ValueError, match="params/Dense_0/kernel holds 4 non-finite values"):
        pixel_policy.read_run(tmp_path)


def test_replay_runs_the_student_on_the_gym_envs_camera(student_dir):
    """``so101-mjx replay student.onnx``: the gym env with image_obs=True at the student's size."""
    out, _, _ = student_dir
    path = pixel_policy.export(out)
    result = replay.replay(path, episodes=1)
    assert result["episodes"] == 1 and result["mean_length"] == 3  # truncated at the config's episode length
    with pytest.raises(ValueError, match="runs only there"):
        replay.replay(path, env="SO101PickPlace-v0", episodes=1)


def test_the_students_camera_file_reaches_replay_and_the_simulated_follower(tmp_path):
    """A student distilled through a camera file (``distill --camera-spec front=FILE``) is replayed and deployed
    on the simulator through that file: the gym env's ``camera_spec``, the simulated follower's ``camera_specs``."""
    from so101_mjx.follower.deploy import make_robot, plan

    student = pixel_policy.PixelStudent(channels=(4, 6, 5), hidden=16)
    params = student.init(jax.random.PRNGKey(0), jnp.zeros((1, SIZE, SIZE, 3), jnp.uint8), jnp.zeros((1, 14)))
    lens = {"fovy": 25.0, "latency": 1}
    env_config = {"image_obs": True, "image_size": SIZE, "image_quality": "fast", "episode_length": 3, "camera_specs": {"front": lens}}
    distill.save(tmp_path, params, {"teacher": "t.onnx", "env": "SO101PickCube-v0", "env_config": env_config})
    path = pixel_policy.export(tmp_path)
    env = replay.make_gym_env("SO101PickCube-v0", policies.load(path).env_config, SIZE)
    try:
        assert (env.unwrapped._camera_spec.fovy, env.unwrapped._lag) == (25.0, 1)
    finally:
        env.close()
    p = plan(path)
    assert p.camera_specs == {"front": lens}
    follower = make_robot("so101_mjx", p)
    assert follower.config._camera_specs["front"].fovy == 25.0 and follower.config._camera_specs["front"].latency == 1
