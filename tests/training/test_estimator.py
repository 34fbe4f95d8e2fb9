"""The estimator student (so101_mjx.training.estimator): a pixel head estimating the teacher's privileged state, the
frozen teacher acting on it; its files, ONNX graph and distillation."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from so101_mjx.envs import make
from so101_mjx.errors import InputError
from so101_mjx.training import distill, estimator, pixel_policy, policies
from so101_mjx.training.estimator import Estimator
from so101_mjx.training.policy import NumpyPolicy, PolicyWeights, forward

SIZE, AGENT_POS, STATE, ACTIONS = 36, 6, 3, 6
BOUNDS = ((-6.0,) * ACTIONS, (6.0,) * ACTIONS)
CONFIG = {"control_mode": "joint", "relative_joint_targets": True, "max_relative_target": 6.0, "episode_length": 3,
          "image_obs": True, "image_size": SIZE, "image_quality": "fast", "image_cameras": ["front", "wrist"]}


def teacher(seed: int = 0) -> NumpyPolicy:
    """A random joint-mode state teacher: six motor positions and three privileged entries in, six targets out."""
    rng = np.random.default_rng(seed)
    widths = (AGENT_POS + STATE, 16, 2 * ACTIONS)
    weights = PolicyWeights(rng.normal(0, 1, widths[0]).astype(np.float32),
                            rng.uniform(0.5, 2, widths[0]).astype(np.float32),
                            tuple(rng.normal(0, 0.5, (a, b)).astype(np.float32) for a, b in zip(widths, widths[1:])),
                            tuple(rng.normal(0, 0.1, b).astype(np.float32) for b in widths[1:]), "swish")
    return NumpyPolicy(weights, {}, np.full(ACTIONS, 6.0), np.zeros(ACTIONS))


@pytest.fixture(scope="module")
def joint_env():
    return make("SO101PickCube-v0", backend="c", **{**CONFIG, "image_obs": False})


def student_variables(policy: NumpyPolicy, seed: int = 1, origin: dict[str, np.ndarray] | None = None):
    """A random student of ``policy``; with ``origin`` (a chain's arrays) estimating relative to the gripper."""
    est = Estimator.of_teacher(policy.weights, AGENT_POS, "world" if origin is None else "gripper",
                               0 if origin is None else len(origin["origin_qpos0"]))
    student = pixel_policy.PixelStudent(channels=(4, 6, 5), hidden=16, bounds=BOUNDS, estimator=est)
    blank = (jnp.zeros((1, SIZE, SIZE, 3), jnp.uint8),) * 2
    variables = student.init(jax.random.PRNGKey(seed), blank, jnp.zeros((1, AGENT_POS)))
    params = jax.tree.map(lambda x: 3.0 * x, variables["params"])
    teacher_arrays = estimator.teacher_arrays(policy.weights, policy.scale, policy.offset,
                                              np.array([0.3, 0.0, 0.03]), np.array([0.05, 0.05, 0.02]), origin)
    return student, {"params": params, estimator.COLLECTION: teacher_arrays}


@pytest.fixture(scope="module", params=["world", "gripper"])
def estimator_student(request, tmp_path_factory, joint_env):
    """A random two-camera estimator student, saved as ``so101-mjx distill --student estimator`` saves one; its
    estimate in the world or relative to the gripper."""
    out = tmp_path_factory.mktemp("estimator_student")
    policy = teacher()
    student, variables = student_variables(
        policy, origin=None if request.param == "world" else distill.origin_arrays(joint_env))
    distill.save(out, variables, {"teacher": "t.onnx", "env": "SO101PickCube-v0", "env_config": CONFIG,
                                  "action_bounds": [list(b) for b in BOUNDS],
                                  "estimator": student.estimator.as_json()})
    return out, student, variables, policy


def test_with_the_true_state_the_student_acts_as_its_teacher():
    policy = teacher()
    student, variables = student_variables(policy)
    rng = np.random.default_rng(2)
    frames = tuple(rng.integers(0, 256, (5, SIZE, SIZE, 3), dtype=np.uint8) for _ in range(2))
    motors = rng.normal(0, 30, (5, AGENT_POS)).astype(np.float32)
    action, raw = student.apply(variables, frames, motors, output="estimate")
    arrays = variables[estimator.COLLECTION]
    state = np.asarray(raw) * arrays["estimate_std"] + arrays["estimate_mean"]
    want = forward(policy.weights, np.concatenate([motors, state], -1), policy.scale, policy.offset)
    np.testing.assert_allclose(np.asarray(action), want, atol=1e-4)
    assert np.ptp(want) > 1.0  # the frames move the estimate, and it the action
    assert raw.shape == (5, STATE)


def test_the_onnx_estimator_student_equals_the_flax_one_and_loads(estimator_student, tmp_path):
    ort = pytest.importorskip("onnxruntime")
    out, student, variables, _ = estimator_student
    path = pixel_policy.export(out)
    rng = np.random.default_rng(3)
    frames = tuple(rng.integers(0, 256, (4, SIZE, SIZE, 3), dtype=np.uint8) for _ in range(2))
    motors = rng.normal(0, 30, (4, AGENT_POS)).astype(np.float32)
    want = np.asarray(student.apply(variables, frames, motors))
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = session.run(["actions"], {"pixels": frames[0], "pixels_wrist": frames[1], "agent_pos": motors})[0]
    np.testing.assert_allclose(got, want, atol=1e-4)
    for loaded in (path, out / pixel_policy.STUDENT_FILE):
        policy = policies.load(loaded)
        assert policy.pixel and policy.spec.estimator == student.estimator
        np.testing.assert_allclose(policy.numpy_fn(frames, motors), want, atol=1e-4)
    assert {i.name for i in session.get_inputs()} == {"pixels", "pixels_wrist", "agent_pos"}


def test_a_broken_estimator_student_is_one_line(estimator_student, tmp_path):
    out, *_ = estimator_student
    arrays = dict(np.load(out / pixel_policy.STUDENT_FILE))
    meta = json.loads((out / pixel_policy.META_FILE).read_text())
    cases = {
        "teacher/kernel_1": (lambda a: a.pop("teacher/kernel_1"), meta, r"the teacher arrays must be"),
        "shape": (lambda a: a.update({"teacher/obs_std": np.ones(4, np.float32)}), meta,
                  r"teacher/obs_std has shape \(4,\), expected \(9,\)"),
        "std": (lambda a: a.update({"teacher/estimate_std": np.zeros(3, np.float32)}), meta,
                "teacher/estimate_std must be positive"),
        "no estimator": (lambda a: None, {k: v for k, v in meta.items() if k != "estimator"},
                         "teacher arrays .* in a student without an estimator"),
        "layers": (lambda a: None, {**meta, "estimator": {**meta["estimator"], "layers": [8, 16, 12]}},
                   r"estimator.layers \[8, 16, 12\] must take agent_pos \(6\)"),
        "activation": (lambda a: None, {**meta, "estimator": {**meta["estimator"], "activation": "gelu"}},
                       "estimator.activation must be one of"),
    }
    for name, (edit, edited_meta, message) in cases.items():
        broken = tmp_path / name.replace(" ", "_").replace("/", "_")
        broken.mkdir()
        edited = dict(arrays)
        edit(edited)
        np.savez(broken / pixel_policy.STUDENT_FILE, **edited)
        (broken / pixel_policy.META_FILE).write_text(json.dumps(edited_meta))
        with pytest.raises(InputError, match=message) as err:
            policies.load(broken / pixel_policy.STUDENT_FILE)
        assert "\n" not in str(err.value)


def test_the_gripper_point_is_the_kinematics_in_numpy_jax_and_onnx(joint_env, tmp_path):
    from so101_mjx.robot import motors

    arrays = distill.origin_arrays(joint_env)
    rng = np.random.default_rng(4)
    ranges = joint_env.arm.motor_ranges
    q = rng.uniform(ranges[:, 0], ranges[:, 1], (16, 6))
    motor = motors.to_motor(q, ranges, "degrees").astype(np.float32)
    want = np.asarray(jax.jit(lambda q: joint_env.arm.kin.point(q, "gripperframe"))(q[:, :5]))
    got = estimator.gripper_point(arrays, motor)
    np.testing.assert_allclose(got, want, atol=2e-6)  # m, float32 arrays
    assert np.ptp(want, axis=0).min() > 0.05  # the draws move the gripper on every axis
    np.testing.assert_allclose(np.asarray(estimator.gripper_point(
        {k: jnp.asarray(v) for k, v in arrays.items()}, jnp.asarray(motor), jnp)), got, atol=1e-6)
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper

    from so101_mjx.training.export import graph_builders

    inits, nodes = [], []
    point = estimator.point_nodes(arrays, "agent_pos", graph_builders(inits, nodes))
    value = lambda name, size: helper.make_tensor_value_info(name, TensorProto.FLOAT, [None, size])  # noqa: E731
    graph = helper.make_graph(nodes, "point", [value("agent_pos", 6)], [value(point, 3)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(session.run([point], {"agent_pos": motor})[0], got, atol=1e-6)


def test_a_gripper_origin_estimate_is_relative_to_the_gripper(joint_env):
    policy = teacher()
    arrays = distill.origin_arrays(joint_env)
    student, variables = student_variables(policy, origin=arrays)
    assert student.estimator.origin == "gripper" and student.estimator.chain == len(arrays["origin_qpos0"])
    rng = np.random.default_rng(5)
    frames = tuple(rng.integers(0, 256, (5, SIZE, SIZE, 3), dtype=np.uint8) for _ in range(2))
    motors = rng.normal(0, 30, (5, AGENT_POS)).astype(np.float32)
    action, raw = student.apply(variables, frames, motors, output="estimate")
    teacher_arrays = variables[estimator.COLLECTION]
    state = (np.asarray(raw) * teacher_arrays["estimate_std"] + teacher_arrays["estimate_mean"]
             + estimator.gripper_point(teacher_arrays, motors))
    want = forward(policy.weights, np.concatenate([motors, state], -1), policy.scale, policy.offset)
    np.testing.assert_allclose(np.asarray(action), want, atol=1e-4)
    with pytest.raises(InputError, match="estimator.origin 'gripper' needs positions"):
        Estimator(4, (10, 16, 12), "swish", "gripper", 5)
    with pytest.raises(InputError, match="estimate_origin applies to student='estimator' only"):
        distill.DistillConfig(estimate_origin="gripper")
    with pytest.raises(InputError, match="needs a joint-mode teacher"):
        distill.origin_arrays(make("SO101PickCube-v0", backend="c"))
    world_student = student_variables(policy)[0]  # a student estimating in the world, given to a gripper-origin run
    config = distill.DistillConfig(iterations=1, episodes=1, steps=1, updates=1, student="estimator",
                                   estimate_origin="gripper")
    with pytest.raises(InputError, match="estimate_origin='gripper'"):
        distill.distill(make("SO101PickCube-v0", backend="c", **CONFIG), lambda obs: obs, config,
                        student=world_student, teacher_policy=policy)


@pytest.mark.slow  # a DAgger run on two cameras
def test_distilling_an_estimator_fits_the_state_and_keeps_the_teacher_frozen():
    """Relative to the gripper: the world origin's fit is the same code with a zero origin."""
    env = make("SO101PickCube-v0", backend="c", **{**CONFIG, "episode_length": 4})
    policy = teacher()
    config = distill.DistillConfig(iterations=2, episodes=3, steps=4, updates=20, batch_size=8, student="estimator",
                                   estimate_origin="gripper")
    act = lambda obs: forward(policy.weights, obs, policy.scale, policy.offset, jnp)  # noqa: E731
    student, variables, rows = distill.distill(env, act, config, teacher_policy=policy)
    chain = len(distill.origin_arrays(env)["origin_qpos0"])
    assert student.estimator == Estimator(STATE, (AGENT_POS + STATE, 16, 2 * ACTIONS), "swish", "gripper", chain)
    assert [r["driver"] for r in rows] == ["teacher", "student", "final student"]
    errors = [r["estimate_error"] for r in rows]  # m, on every row; the block does not move in 4 steps
    assert errors[0] > 0.1 and all(0 <= e < 0.01 for e in errors[1:])  # untrained, then standardized and fitted
    arrays = variables[estimator.COLLECTION]
    np.testing.assert_array_equal(arrays["kernel_0"], policy.weights.kernels[0])  # the teacher is frozen
    assert np.all(np.asarray(arrays["estimate_std"]) > 0)
    assert abs(float(arrays["estimate_mean"][0])) < 0.1  # m: the block's x from the gripper's, not from the base's


def test_estimator_options_are_checked():
    with pytest.raises(InputError, match="student must be one of"):
        distill.DistillConfig(student="big")
    with pytest.raises(InputError, match="state_loss applies to student='direct' only"):
        distill.DistillConfig(student="estimator", state_loss=1.0)
    weights = teacher().weights
    with pytest.raises(InputError, match="no privileged state after the 9 of agent_pos"):
        Estimator.of_teacher(weights, 9)


@pytest.mark.slow  # two pixel envs compiled
def test_evaluate_runs_a_pixel_student_under_visual_and_frame_latency_conditions(estimator_student):
    from so101_mjx.training import suites

    out, *_ = estimator_student
    spec = {"episodes": 2, "conditions": ["visual-wide", "frame-latency+1"]}
    result = suites.run_suite(out / pixel_policy.STUDENT_FILE, spec, seed=1, progress=lambda line: None)
    assert [row["condition"] for row in result["cells"]] == spec["conditions"] and not result["skipped"]
    assert all(row["episodes"] == 2 and row["mean_length"] == 3 for row in result["cells"])  # ran to the episode end
