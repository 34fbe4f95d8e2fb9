"""The gym env's ``MjData`` mirrors its physics after every reset and step, as the reference's does,
and gym envs of one config share their compiled functions."""

import mujoco
import numpy as np

import so101_mjx.gym as sgym


def test_data_taken_before_a_step_holds_the_state_the_step_produced():
    """A reference held across steps (the reference's own tests keep ``env._data``) shows the new state:
    ctrl holds the arm's target joint angles, and qpos, qvel, sensordata and the frames are what a
    ``MjData`` holds after ``mj_step``."""
    env = sgym.SO101PickCubeGymEnv()
    env.reset(seed=0)
    data = env._data
    for _ in range(3):
        env.step(np.array([0.3, -0.2, 0.1, 0.0], np.float32))
    p = env.state.physics
    arm = np.asarray(env._arm_ctrl_ids)
    assert np.abs(data.ctrl[arm]).max() > 0.05  # target angles, not zeros
    np.testing.assert_array_equal(data.ctrl, np.asarray(p.ctrl))
    np.testing.assert_array_equal(data.qpos, np.asarray(p.qpos))
    np.testing.assert_array_equal(data.qvel, np.asarray(p.qvel))
    np.testing.assert_array_equal(data.sensordata, np.asarray(p.sensordata))
    assert data.time == float(p.time) > 0
    # frames evaluated at the last kinematics pass, as after mj_step: the ee sensor is the ee site
    np.testing.assert_allclose(data.site_xpos[env._ee_site_id], data.sensor("so101/ee_pos").data, atol=1e-12)
    obs = env.get_robot_state()
    np.testing.assert_allclose(obs[:5], data.qpos[env._arm_dof_ids], atol=1e-6)
    env.close()


def test_edits_of_the_mirrored_data_still_reach_the_next_step():
    env = sgym.SO101PickCubeGymEnv()
    env.reset(seed=0)
    data = env._data
    data.qpos[env._arm_dof_ids[0]] = 0.4
    mujoco.mj_forward(env._model, data)
    env.step(np.zeros(4, np.float32))
    assert abs(float(env.state.physics.qpos[env._arm_dof_ids[0]]) - 0.4) < 0.1
    env.close()


def test_envs_of_one_config_share_their_compiled_functions_and_keep_their_own_model():
    a, b = sgym.SO101PickCubeGymEnv(), sgym.SO101PickCubeGymEnv(seed=3)
    c = sgym.SO101PickCubeGymEnv(action_scale=0.5)
    assert a._compiled is b._compiled and a._compiled is not c._compiled
    assert a.model is not b.model and a.data is not b.data
    a.reset(seed=1)
    b.reset(seed=2)
    a.step(np.array([0.0, 0.0, 1.0, 1.0], np.float32))
    assert not np.array_equal(a.data.qpos, b.data.qpos)  # separate states
    for env in (a, b, c):
        env.close()
