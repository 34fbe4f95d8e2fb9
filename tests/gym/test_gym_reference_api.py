"""The reference env's API (lerobot_env_so101 0.4.0, the gym envs' seed): SO101GymEnv's and
MujocoGymEnv's constructors, robot methods and private attributes, reset(seed), close(),
action_scale, home_position, cartesian_bounds and xml_path; compared with the reference where it
is installed."""

import inspect
import logging

import numpy as np
import pytest

import so101_mjx.gym as sgym

ref = pytest.importorskip("lerobot_env_so101")
from lerobot_env_so101 import mujoco_env as ref_mujoco_env  # noqa: E402

ACTIONS = [np.array(a)
           for a in ([0.3, -0.2, -0.4, 0.2], [0.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 0.6], [-0.5, 0.4, 0.3, 0.0])]


def _robot_pair(**kwargs):
    """Our robot-only SO101GymEnv and the reference's (noslip off, as our scenes), both reset_robot()."""
    ours, theirs = sgym.SO101GymEnv(**kwargs), ref.SO101GymEnv(**kwargs)
    theirs.model.opt.noslip_iterations = 0
    ours.reset_robot(), theirs.reset_robot()
    return ours, theirs


def test_constructor_parameters_and_defaults_are_the_references():
    """Seed 000, SO101GymEnv(...) and MujocoGymEnv(...): the same parameters, in order, with the same defaults."""
    for ours, theirs in ((sgym.SO101GymEnv, ref.SO101GymEnv), (sgym.MujocoGymEnv, ref.MujocoGymEnv)):
        a, b = inspect.signature(ours).parameters, inspect.signature(theirs).parameters
        assert list(a)[: len(b)] == list(b)
        for name, p in b.items():
            if name not in ("render_spec", "home_position", "cartesian_bounds", "xml_path"):
                assert a[name].default == p.default, name
    np.testing.assert_array_equal(sgym.HOME_POSITION, ref_mujoco_env.HOME_POSITION)
    np.testing.assert_array_equal(sgym.CARTESIAN_BOUNDS, ref_mujoco_env.CARTESIAN_BOUNDS)
    assert inspect.signature(sgym.SO101GymEnv).parameters["xml_path"].default is None


def test_base_observation_space_and_robot_only_env():
    """Seed 000, SO101GymEnv.__init__: agent_pos as a Dict (tcp_pose 7, tcp_vel 6, gripper_pose 1),
    pixels.front added with image_obs; the base class implements no step, and reset only seeds."""
    for image_obs in (False, True):
        ours = sgym.SO101GymEnv(image_obs=image_obs)
        assert ours.observation_space == ref.SO101GymEnv(image_obs=image_obs).observation_space
        assert ours.action_space == ref.SO101GymEnv().action_space
    assert ours.reset(seed=3) is None and ours.np_random.random() == np.random.default_rng(3).random()
    with pytest.raises(NotImplementedError):
        ours.step(np.zeros(4))
    assert isinstance(ours, sgym.MujocoGymEnv) and issubclass(sgym.SO101PickCubeGymEnv, sgym.SO101GymEnv)


def test_robot_methods_match_the_reference():
    """Seed 000, SO101GymEnv.reset_robot / apply_action / get_robot_state / get_gripper_pose / ik_point_pos."""
    ours, theirs = _robot_pair(action_scale=0.05)
    for action in ACTIONS:
        ours.apply_action(action), theirs.apply_action(action)
        state, ref_state = ours.get_robot_state(), theirs.get_robot_state()
        assert state.dtype == ref_state.dtype == np.float64 and state.shape == (14,)
        np.testing.assert_allclose(state, ref_state, rtol=0, atol=1e-6)
        np.testing.assert_array_equal(ours.get_gripper_pose(), theirs.get_gripper_pose())
        assert ours.get_gripper_pose().dtype == np.float32
        np.testing.assert_allclose(ours._target_ee_pos, theirs._target_ee_pos, rtol=0, atol=1e-9)
        np.testing.assert_allclose(ours.ik_point_pos, theirs.ik_point_pos, rtol=0, atol=1e-6)
        assert ours._last_action_was_zero == theirs._last_action_was_zero
    np.testing.assert_allclose(ours.data.qpos[:6], theirs.data.qpos[:6], rtol=0, atol=1e-6)


def test_home_position_is_applied_by_reset_robot():
    """Seed 000, SO101GymEnv(home_position=...): reset_robot() sets the arm's joints and targets to it."""
    home = np.array([0.2, -0.3, 0.4, 0.1, -0.5])
    ours, theirs = _robot_pair(home_position=home)
    np.testing.assert_allclose(ours.get_robot_state()[:5], home.astype(np.float32))
    np.testing.assert_array_equal(ours.data.ctrl[ours._arm_ctrl_ids], home)
    np.testing.assert_allclose(ours.ik_point_pos, theirs.ik_point_pos, rtol=0, atol=1e-12)
    np.testing.assert_allclose(ours._target_ee_pos, theirs._target_ee_pos, rtol=0, atol=1e-12)
    env = sgym.SO101PickCubeGymEnv(home_position=home)
    obs, _ = env.reset(seed=0)
    np.testing.assert_allclose(obs["agent_pos"][:5], home.astype(np.float32))
    with pytest.raises(ValueError, match=r"home_position must have shape \(5,\)"):
        sgym.SO101GymEnv(home_position=np.zeros(6))


def test_cartesian_bounds_clip_the_target():
    """Seed 000, SO101GymEnv(cartesian_bounds=...): the IK target is clipped to the box every step."""
    bounds = np.array([[0.15, -0.1, 0.05], [0.3, 0.1, 0.25]])
    ours, theirs = _robot_pair(cartesian_bounds=bounds)
    for _ in range(2):
        ours.apply_action([1.0, 1.0, 1.0, 0.5]), theirs.apply_action([1.0, 1.0, 1.0, 0.5])
    np.testing.assert_array_equal(ours._target_ee_pos, bounds[1])
    np.testing.assert_allclose(ours.get_robot_state(), theirs.get_robot_state(), rtol=0, atol=1e-6)
    wide = np.array([[0.05, -0.4, -0.1], [0.6, 0.4, 0.6]])  # beyond the default box, as the reference allows
    ours, theirs = _robot_pair(cartesian_bounds=wide)
    ours.apply_action([1.0, 0.0, 1.0, 0.5]), theirs.apply_action([1.0, 0.0, 1.0, 0.5])
    np.testing.assert_array_equal(ours._target_ee_pos[[0, 2]], wide[1, [0, 2]])
    np.testing.assert_allclose(ours._target_ee_pos, theirs._target_ee_pos, rtol=0, atol=1e-12)
    np.testing.assert_allclose(ours.get_robot_state(), theirs.get_robot_state(), rtol=0, atol=1e-6)
    for bad, words in ((np.zeros((3, 2)), r"cartesian_bounds must have shape \(2, 3\)"),
                       (bounds[::-1], "min <= max"), ([[0.1, -0.3, np.nan], [0.5, 0.3, 0.4]], "finite")):
        with pytest.raises(ValueError, match=words):
            sgym.SO101GymEnv(cartesian_bounds=bad)


def test_action_scale_is_positive_without_an_upper_bound():
    """Seed 000, action_scale: metres per unit of position action, must be positive (no upper bound); non-finite
    refused."""
    env = sgym.SO101PickCubeGymEnv(action_scale=2.0)
    env.reset(seed=0)
    before = env._target_ee_pos
    env.step([0.01, 0.0, 0.0, 1.0])
    np.testing.assert_allclose(env._target_ee_pos - before, [0.02, 0.0, 0.0], rtol=0, atol=1e-12)
    assert env._action_scale == 2.0
    for bad in (0.0, -1.0):
        with pytest.raises(ValueError, match="action_scale must be positive"):
            sgym.SO101PickCubeGymEnv(action_scale=bad)
    with pytest.raises(ValueError, match="action_scale must be a finite number"):
        sgym.SO101GymEnv(action_scale=float("nan"))


def test_xml_path_loads_a_scene():
    """Seed 000, SO101GymEnv(xml_path=...) and MujocoGymEnv(xml_path): the MJCF to load; a missing one is an error."""
    path = ref_mujoco_env.ASSETS_DIR / "pick_scene.xml"
    env = sgym.SO101GymEnv(xml_path=path, action_scale=0.05)
    assert env.model.nq == ref.SO101GymEnv().model.nq
    env.reset_robot()
    env.apply_action([0.0, 0.0, 0.5, 1.0])
    assert env.get_robot_state()[13] > 0.2
    bare = sgym.MujocoGymEnv(str(path), seed=1, control_dt=0.1)
    assert bare._n_substeps == 50 and bare.physics_dt == 0.002 and bare.data.qpos.shape == (bare.model.nq,)
    with pytest.raises(FileNotFoundError, match="scene file not found"):
        sgym.SO101GymEnv(xml_path="no/such/scene.xml")


def test_reset_takes_a_positional_seed_and_extra_kwargs():
    """Seed 000, SO101PickCubeGymEnv.reset(seed=None, **kwargs)."""
    env = sgym.SO101PickPlaceGymEnv(random_block_position=True)
    a, _ = env.reset(5)
    b, _ = env.reset(seed=5, options={"anything": 1})
    np.testing.assert_array_equal(a["environment_state"], b["environment_state"])
    c, _ = ref.SO101PickPlaceGymEnv(random_block_position=True).reset(5)
    np.testing.assert_allclose(a["environment_state"], c["environment_state"], rtol=0, atol=1e-6)


class _FailingViewer:
    closed = False

    def close(self):
        self.closed = True
        raise RuntimeError("GL context already gone")


def test_close_logs_release_errors(caplog):
    """Seed 000, MujocoGymEnv.close: a failing release is logged (debug, with the traceback), not raised."""
    env = sgym.SO101GymEnv()
    viewer = env._viewer = _FailingViewer()
    with caplog.at_level(logging.DEBUG, logger="so101_mjx.gym.mujoco_env"):
        env.close()
    assert viewer.closed and env._viewer is None
    assert any("close() failed" in r.getMessage() and r.exc_info for r in caplog.records)
    env.close()  # nothing left to release


def test_private_attributes_match_the_reference():
    """Seed 000, every ``self._*`` the reference's source defines (MujocoGymEnv, SO101GymEnv,
    SO101PickCubeGymEnv, SO101PickPlaceGymEnv), after identical steps."""
    ours, theirs = (sgym.SO101PickPlaceGymEnv(action_scale=0.025, seed=7),
                    ref.SO101PickPlaceGymEnv(action_scale=0.025, seed=7))
    theirs.model.opt.noslip_iterations = 0
    ours.reset(seed=0), theirs.reset(seed=0)
    for action in ACTIONS:
        ours.step(action), theirs.step(action)
    exact = ("_control_dt", "_n_substeps", "_home_position", "_cartesian_bounds", "_action_scale", "_top_down_ik",
             "_arm_dof_ids", "_arm_ctrl_ids", "_gripper_ctrl_id", "_roll_joint_id", "_roll_index",
             "_last_action_was_zero", "_block_z", "_random_block_position", "_goal_pos", "_block_dof_adr",
             "_gripper_qpos_adr", "_was_carried", "reward_type", "_viewer")
    for name in exact:
        np.testing.assert_array_equal(getattr(ours, name), getattr(theirs, name), err_msg=name)
    for name in ("_ik_point_offset", "_target_ee_pos", "_z_init", "_top_down_seed"):
        x, y = getattr(ours, name), getattr(theirs, name)
        np.testing.assert_allclose(x() if callable(x) else x, y() if callable(y) else y, rtol=0,
                                   atol=1e-6, err_msg=name)
    assert (ours._render_specs.height == theirs._render_specs.height and ours._model is ours.model
            and ours._data is ours.data)
    m = ours.model  # ids of our scene's sites and cameras (it has marker sites the reference's lacks)
    assert ours._camera_id == m.camera("front").id and ours._ee_site_id == m.site("gripperframe").id
    assert ours._random.rand() == theirs._random.rand()
    for name in ("_compute_reward", "_is_success"):
        assert getattr(ours, name)() == getattr(theirs, name)(), name
    for k, v in theirs._compute_observation().items():
        np.testing.assert_allclose(ours._compute_observation()[k], v, rtol=0, atol=1e-6)


def test_pick_cube_reward_attributes_match_the_reference():
    """Seed 000, SO101PickCubeGymEnv: reward_type, _z_success and the dense _compute_reward()."""
    ours, theirs = (sgym.SO101PickCubeGymEnv(reward_type="dense", action_scale=0.025),
                    ref.SO101PickCubeGymEnv(reward_type="dense", action_scale=0.025))
    theirs.model.opt.noslip_iterations = 0
    ours.reset(seed=0), theirs.reset(seed=0)
    for action in ACTIONS:
        _, reward, *_ = ours.step(action)
        theirs.step(action)
        assert reward == pytest.approx(ours._compute_reward(), abs=1e-12)
        assert ours._compute_reward() == pytest.approx(theirs._compute_reward(), abs=1e-6)
    assert ours.reward_type == "dense" and ours._z_success == pytest.approx(theirs._z_success, abs=1e-12)
    with pytest.raises(AttributeError):
        sgym.SO101PickPlaceGymEnv()._z_success  # noqa: B018  (the reference's PickPlace never sets it)


@pytest.mark.parametrize("name", ["SO101PickCubeGymEnv", "SO101PickPlaceGymEnv"])
def test_task_constructors_take_the_references_positional_order(name):
    """Seed 000, SO101PickCubeGymEnv(seed, control_dt, physics_dt, render_spec, render_mode, image_obs, ...)
    and SO101PickPlaceGymEnv(...): positional arguments mean what they mean there."""
    theirs = [p for p in inspect.signature(getattr(ref, name)).parameters if p != "self"]
    from so101_mjx.gym.task_env import REFERENCE_POSITIONAL

    task = getattr(sgym, name).task
    assert ["seed", *REFERENCE_POSITIONAL[task]] == theirs
    spec = sgym.GymRenderingSpec(height=24, width=32)
    values = {"control_dt": 0.05, "physics_dt": 0.001, "render_spec": spec, "render_mode": "rgb_array",
              "image_obs": True, "reward_type": "dense", "random_block_position": True, "action_scale": 0.03,
              "top_down_ik": True, "jaw_pads": True}
    env = getattr(sgym, name)(3, *(values[p] for p in theirs[1:]))
    config = env.env.config
    assert ((config.control_dt, config.physics_dt, config.action_scale, config.random_block_position)
            == (0.05, 0.001, 0.03, True))
    assert env.image_obs and env.observation_space["pixels"]["front"].shape == (24, 32, 3)
    env.close()
    with pytest.raises(TypeError, match="multiple values for argument 'control_dt'"):
        getattr(sgym, name)(0, 0.05, control_dt=0.1)
    with pytest.raises(TypeError, match="positional arguments"):
        getattr(sgym, name)(0, *(values[p] for p in theirs[1:]), 1)
