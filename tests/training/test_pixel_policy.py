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
        assert (meta["kind"] == "pixel" and meta["env"] == "SO101PickCube-v0"
                and meta["env_config"]["image_size"] == SIZE)


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


@pytest.mark.slow
def test_replay_runs_the_student_on_the_gym_envs_camera(student_dir):
    """``so101-mjx replay student.onnx``: the gym env with image_obs=True at the student's size."""
    out, _, _ = student_dir
    path = pixel_policy.export(out)
    result = replay.replay(path, episodes=1)
    assert result["episodes"] == 1 and result["mean_length"] == 3  # truncated at the config's episode length
    assert result["physics_dt"] == pytest.approx(0.002)  # the physics step it ran at
    with pytest.raises(ValueError, match="runs only there"):
        replay.replay(path, env="SO101PickPlace-v0", episodes=1)


def test_the_students_camera_file_reaches_replay_and_the_simulated_follower(tmp_path):
    """A student distilled through a camera file (``distill --camera-spec front=FILE``) is replayed and deployed
    on the simulator through that file: the gym env's ``camera_spec``, the simulated follower's ``camera_specs``."""
    from so101_mjx.follower.deploy import make_robot, plan

    student = pixel_policy.PixelStudent(channels=(4, 6, 5), hidden=16)
    params = student.init(jax.random.PRNGKey(0), jnp.zeros((1, SIZE, SIZE, 3), jnp.uint8), jnp.zeros((1, 14)))
    lens = {"fovy": 25.0, "latency": 1}
    env_config = {"image_obs": True, "image_size": SIZE, "image_quality": "fast", "episode_length": 3,
                  "camera_specs": {"front": lens}}
    distill.save(tmp_path, params, {"teacher": "t.onnx", "env": "SO101PickCube-v0", "env_config": env_config})
    path = pixel_policy.export(tmp_path)
    env = replay.make_gym_env("SO101PickCube-v0", policies.load(path).env_config, SIZE)
    try:
        assert (env.unwrapped._camera_spec.fovy, env.unwrapped._rig.lags) == (25.0, {"front": 1})
    finally:
        env.close()
    p = plan(path)
    assert p.camera_specs == {"front": lens}
    follower = make_robot("so101_mjx", p)
    assert follower.config._camera_specs["front"].fovy == 25.0 and follower.config._camera_specs["front"].latency == 1


# -- a student in the follower's language: front and wrist frames, motor positions, joint-mode targets ------------
JOINT_CONFIG = {"control_mode": "joint", "relative_joint_targets": True, "max_relative_target": 6.0,
                "episode_length": 3,
                "image_obs": True, "image_size": SIZE, "image_quality": "fast", "image_cameras": ["front", "wrist"]}
BOUNDS = ((-6.0,) * 6, (6.0,) * 6)


@pytest.fixture(scope="module")
def joint_student(tmp_path_factory):
    """A small random front + wrist joint-mode student of PickCube, saved as ``so101-mjx distill`` saves one, and
    exported."""
    out = tmp_path_factory.mktemp("joint_student")
    student = pixel_policy.PixelStudent(channels=(4, 6, 5), hidden=16, bounds=BOUNDS)
    blank = (jnp.zeros((1, SIZE, SIZE, 3), jnp.uint8),) * 2
    params = jax.tree.map(lambda x: 3.0 * x, student.init(jax.random.PRNGKey(1), blank, jnp.zeros((1, 6))))
    distill.save(out, params, {"teacher": "t.onnx", "env": "SO101PickCube-v0", "env_config": JOINT_CONFIG,
                               "action_bounds": [list(b) for b in BOUNDS]})
    return pixel_policy.export(out), student, params


def test_a_two_camera_joint_student_is_the_same_in_onnx_and_flax(joint_student):
    path, student, params = joint_student
    rng = np.random.default_rng(1)
    front, wrist = (rng.integers(0, 256, (5, SIZE, SIZE, 3), dtype=np.uint8) for _ in range(2))
    motors = rng.normal(0, 30, (5, 6)).astype(np.float32)
    want = np.asarray(student.apply(params, (front, wrist), motors))
    assert want.shape == (5, 6) and np.all(np.abs(want) <= 6.0) and np.ptp(want) > 1.0
    other = np.asarray(student.apply(params, (front, np.zeros_like(wrist)), motors))
    assert np.abs(other - want).max() > 1e-3  # the wrist frames matter: a tower of their own
    for loaded in (path, path.parent / pixel_policy.STUDENT_FILE):  # onnxruntime, and the npz with flax
        policy = policies.load(loaded)
        assert policy.cameras == ("front", "wrist") and policy.spec.agent_pos == 6 and policy.spec.bounds == BOUNDS
        np.testing.assert_allclose(policy.numpy_fn((front, wrist), motors), want, atol=1e-4)
        obs = {"pixels": {"front": front[0], "wrist": wrist[0]}, "agent_pos": motors[0]}
        np.testing.assert_allclose(policy.gym_fn(obs), want[0], atol=1e-4)


def test_the_exported_students_inputs_are_exactly_what_a_follower_returns(joint_student):
    """A follower returns its six motor positions and its cameras' frames, nothing else: the graph's inputs are
    those (one frame input per camera the follower is set up with, agent_pos as wide as its motors), and the
    simulated follower that ``deploy`` sets up for the student returns exactly what the graph takes."""
    import onnx

    from so101_mjx.follower.actions import FEATURE_KEYS
    from so101_mjx.follower.deploy import make_robot, plan

    path, _, _ = joint_student
    graph = onnx.load(str(path)).graph
    inputs = {i.name: [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim] for i in graph.input}
    p = plan(path)
    assert p.image_quality == JOINT_CONFIG["image_quality"]  # the simulated follower renders the student's frames
    with make_robot("so101_mjx", p) as follower:
        assert follower.config.image_quality == p.image_quality
        features = follower.observation_features
        cameras = [k for k, v in features.items() if isinstance(v, tuple)]
        assert sorted(k for k in features if k not in cameras) == sorted(FEATURE_KEYS)
        assert inputs == {**{pixel_policy.input_name(c): ["batch", *features[c]] for c in cameras},
                          "agent_pos": ["batch", len(FEATURE_KEYS)]}
        obs = p.observation(follower.get_observation(), None)
        assert (set(obs) == {"agent_pos", "motors", "policy_motors", "pixels"}
                and list(obs["pixels"]) == cameras == ["front", "wrist"])
        target = p.targets(obs)
        assert target.shape == (6,) and np.all(np.abs(target - obs["motors"]) <= 6.0 + 1e-9)


def test_a_larger_camera_frame_is_resized_to_the_students(joint_student):
    cv2 = pytest.importorskip("cv2")
    from so101_mjx.follower.deploy import plan

    path, _, _ = joint_student
    p = plan(path)
    frame = np.random.default_rng(2).integers(0, 256, (480, 640, 3), dtype=np.uint8)
    np.testing.assert_array_equal(p.frame("wrist", frame),
                                  cv2.resize(frame, (SIZE, SIZE), interpolation=cv2.INTER_AREA))
    with pytest.raises(InputError, match=r"the robot.s .front. frames \(.*\) are \(20, 20, 3\)"):
        p.frame("front", frame[:20, :20])


def test_replay_runs_a_two_camera_student_on_every_camera_it_sees(joint_student):
    """Our gym env draws the front and wrist frames the student takes (at the render quality asked); the
    reference's env has a front camera only, and says so in one line."""
    path, _, _ = joint_student
    result = replay.replay(path, episodes=1, image_quality="fast")
    assert result["episodes"] == 1 and result["mean_length"] == JOINT_CONFIG["episode_length"]
    env = replay.make_gym_env("SO101PickCube-v0", policies.load(path).env_config, SIZE, "fast")
    try:
        assert list(env.observation_space["pixels"]) == ["front", "wrist"]
    finally:
        env.close()
    with pytest.raises(InputError, match="lerobot_env_so101's env renders the front camera only"):
        replay.replay(path, episodes=1, reference=True)
