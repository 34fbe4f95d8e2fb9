"""gymnasium envs: registration, spaces, check_env, reference drop-in, actions, rendering, memory."""

import os
import warnings

import gymnasium as gym
import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import so101_mjx.gym as sgym
from so101_mjx.envs import default_config, names
from so101_mjx.envs.rollout import placement_config

IDS = {"SO101PickCube-v0": 100, "SO101PickPlace-v0": 300, "SO101Reach-v0": 50}  # the reference's limits


@pytest.fixture(scope="module")
def gl() -> bool:
    """Whether an offscreen GL context can be made (MUJOCO_GL=egl or osmesa)."""
    try:
        renderer = mujoco.Renderer(mujoco.MjModel.from_xml_string("<mujoco/>"), 8, 8)
    except Exception:
        return False
    renderer.close()
    return True


def _needs_gl(gl):
    if not gl:
        pytest.skip(f"no offscreen GL backend works here (MUJOCO_GL={os.environ.get('MUJOCO_GL')!r}; try "
                    "egl or osmesa)")


@pytest.mark.parametrize("name", names())
def test_registered_with_episode_limits(name):
    env = gym.make("so101_mjx/" + name, action_scale=0.025)
    assert env.spec.max_episode_steps == IDS.get(name, default_config(name).episode_length)
    obs, info = env.reset(seed=0)
    assert obs["agent_pos"].shape == (14,) and obs["agent_pos"].dtype == np.float32
    assert obs["environment_state"].dtype == np.float32 and obs in env.observation_space
    env.close()


@pytest.mark.parametrize("name", ["SO101PickCube-v0", "SO101PickPlace-v0"])
def test_spaces_match_reference(name):
    ref = pytest.importorskip("lerobot_env_so101")
    ours = sgym.ENV_CLASSES[name]()
    theirs = getattr(ref, sgym.ENV_CLASSES[name].__name__)()
    assert ours.observation_space == theirs.observation_space
    assert ours.action_space == theirs.action_space


@pytest.mark.parametrize("name", names())
def test_check_env(name, gl):
    env = sgym.ENV_CLASSES[name](**({"action_scale": 0.025, **placement_config(name, True)}
                                    if placement_config(name, True) else {}))
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*Box observation space (minimum|maximum) value is")
        check_env(env, skip_render_check=not gl)
    env.close()


def test_seeding_is_reproducible_and_seed_dependent():
    env = sgym.SO101PickPlaceGymEnv(random_block_position=True)
    a, _ = env.reset(seed=3)
    b, _ = env.reset(seed=3)
    c, _ = env.reset(seed=4)
    np.testing.assert_array_equal(a["environment_state"], b["environment_state"])
    assert np.abs(a["environment_state"] - c["environment_state"]).max() > 1e-3


def test_drop_in_for_reference_pick_place(rng):
    """Same initial state and actions as lerobot_env_so101 (noslip off): same obs, reward, info, properties."""
    ref_pkg = pytest.importorskip("lerobot_env_so101")
    ref = ref_pkg.SO101PickPlaceGymEnv(action_scale=0.025)
    ref.model.opt.noslip_iterations = 0
    ref_obs, _ = ref.reset(seed=0)
    env = sgym.SO101PickPlaceGymEnv(action_scale=0.025)
    obs, _ = env.reset_to(env.env.reset_to(jax.random.PRNGKey(0), block_xy=jnp.asarray(env.env.fixed_block_xy)))
    for k in ref_obs:
        np.testing.assert_allclose(obs[k], ref_obs[k], rtol=2e-7, atol=1e-8)
    for i in range(8):
        a = np.r_[rng.uniform(-1, 1, 3), rng.uniform(0, 1)]  # float64: the reference scales float32 deltas in float32
        out, ref_out = env.step(a), ref.step(a)
        for k in ref_out[0]:
            np.testing.assert_allclose(out[0][k], ref_out[0][k], rtol=2e-7, atol=1e-8)
        assert out[1:4] == ref_out[1:4] and out[4] == {**ref_out[4], "is_success": ref_out[4]["succeed"]}
        if i == 0:  # the properties, from one identical step (function-level contract)
            np.testing.assert_allclose(env.ik_point_pos, ref.ik_point_pos, rtol=0, atol=1e-12)
            np.testing.assert_array_equal(env.goal_pos, ref.goal_pos)
            np.testing.assert_allclose(env.data.qpos, ref.data.qpos, rtol=0, atol=1e-12)
            np.testing.assert_allclose(env.data.ctrl, ref.data.ctrl, rtol=0, atol=1e-12)
    assert env.model.nq == ref.model.nq and env.control_dt == ref.control_dt and env.physics_dt == ref.physics_dt


@pytest.mark.parametrize("bad", [np.zeros(3), np.zeros(7), np.zeros((1, 4)), np.zeros(())])
def test_wrong_shape_action_raises(bad):
    env = sgym.SO101PickCubeGymEnv()
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"action must have shape \(4,\)"):
        env.step(bad)


def test_nonfinite_actions_hold_and_never_crash():
    env = sgym.SO101PickCubeGymEnv(action_scale=0.025)
    env.reset(seed=0)
    env.step([0.0, 0.0, 0.5, 1.0])
    ctrl = env.data.ctrl.copy()
    for a in ([np.nan] * 4, [np.inf, -np.inf, 0.0, np.nan]):
        obs, reward, *_ = env.step(a)
        assert all(np.isfinite(v).all() for v in obs.values()) and np.isfinite(reward)
        assert env.data.ctrl[5] == ctrl[5]  # NaN grasp keeps the jaw command
    assert int(env.state.info["nonfinite_actions"]) == 2


def test_gripper_helpers_match_reference():
    ref = pytest.importorskip("lerobot_env_so101.gripper")
    ctrlrange = (-0.17453, 1.74533)
    for x in np.linspace(-0.5, 1.5, 41):
        assert sgym.normalized_to_ctrl(x, ctrlrange) == ref.normalized_to_ctrl(x, ctrlrange)
        assert sgym.ctrl_to_normalized(x, ctrlrange) == ref.ctrl_to_normalized(x, ctrlrange)
    assert sgym.ctrl_to_normalized(2.0, ctrlrange) > 1.0  # not clipped, as the reference


def test_seven_dof_adapter():
    with pytest.warns(UserWarning, match="discards the rotation deltas"):
        env = sgym.SevenDofToFourDofAdapter(sgym.SO101PickCubeGymEnv())
    assert env.action_space.shape == (7,)
    np.testing.assert_array_equal(env.action(np.arange(7)), [0, 1, 2, 6])
    with pytest.raises(ValueError, match=r"shape \(7,\)"):
        env.action(np.zeros(4))
    with pytest.raises(ValueError, match="4-dim Box action space"), pytest.warns(UserWarning):
        sgym.SevenDofToFourDofAdapter(env)


def test_invalid_config_and_render_mode_raise():
    with pytest.raises(ValueError, match="action_scale must be positive"):
        sgym.SO101PickCubeGymEnv(action_scale=-1.0)
    with pytest.raises(ValueError, match="render_mode must be one of"):
        sgym.SO101PickCubeGymEnv(render_mode="depth")


def test_render_and_image_obs(gl):
    _needs_gl(gl)
    spec = sgym.GymRenderingSpec(height=48, width=64)
    env = sgym.SO101PickCubeGymEnv(render_spec=spec, image_obs=True)
    obs, _ = env.reset(seed=0)
    assert set(obs) == {"pixels", "agent_pos"} and obs in env.observation_space
    frame = obs["pixels"]["front"]
    assert frame.shape == (48, 64, 3) and frame.dtype == np.uint8 and frame.std() > 5
    for _ in range(3):
        obs, *_ = env.step([0.0, 0.0, 1.0, 1.0])
    assert np.abs(obs["pixels"]["front"].astype(int) - frame).max() > 0  # the arm moved in the picture
    np.testing.assert_array_equal(env.render(), obs["pixels"]["front"])
    env.close()


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _random_steps(n_steps: int, warmup: int) -> tuple[int, int]:
    """(RSS after warm-up, RSS at the end) of ``n_steps`` random actions with auto-reset."""
    env = gym.make("so101_mjx/SO101PickCube-v0", action_scale=0.025)
    env.action_space.seed(0)
    obs, _ = env.reset(seed=0)
    start = 0
    for i in range(n_steps):
        obs, reward, terminated, truncated, _ = env.step(env.action_space.sample())
        assert (np.isfinite(obs["agent_pos"]).all() and np.isfinite(obs["environment_state"]).all()
                and np.isfinite(reward))
        if terminated or truncated:
            env.reset()
        if i == warmup:
            start = _rss_bytes()
    env.close()
    return start, _rss_bytes()


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc (Linux) to read RSS")
# 5,000 steps by default; 20,000 in the slow set (a 1 kB-per-step leak grows RSS past 5 %); 100,000 as a soak
@pytest.mark.parametrize("n_steps, warmup", [
    (5_000, 1_000),
    pytest.param(20_000, 5_000, marks=[pytest.mark.slow, pytest.mark.optimized]),
    pytest.param(100_000, 5_000, marks=pytest.mark.soak),
])
def test_random_steps_finite_and_memory_steady(n_steps, warmup):
    start, end = _random_steps(n_steps, warmup)
    print(f"{n_steps} steps: RSS {start / 2**20:.1f} MiB after warm-up -> {end / 2**20:.1f} MiB "
          f"({end / start - 1:+.2%})")
    assert end < 1.05 * start


@pytest.mark.parametrize("name", ["SO101PickCube-v0", "SO101PickPlace-v0"])
def test_reset_seed_places_as_the_reference(name):
    ref = pytest.importorskip("lerobot_env_so101")
    ours = sgym.ENV_CLASSES[name](random_block_position=True)
    theirs = getattr(ref, sgym.ENV_CLASSES[name].__name__)(random_block_position=True)
    for seed in (0, 1, 7, 123):
        obs, _ = ours.reset(seed=seed)
        ref_obs, _ = theirs.reset(seed=seed)
        np.testing.assert_allclose(obs["environment_state"], ref_obs["environment_state"], rtol=0, atol=1e-6)
        np.testing.assert_allclose(obs["agent_pos"], ref_obs["agent_pos"], rtol=0, atol=1e-6)
    ours.close()


def _scenario(env, mujoco_):
    """Reference-style scenario code: move the block through ``_data``, mj_forward, step, read back."""
    env.reset(seed=0)
    block = env._data.jnt("block").qpos
    block[:2] = (0.27, 0.04)
    mujoco_.mj_forward(env._model, env._data)
    before = env._target_ee_pos.copy()
    obs, *_ = env.step(np.asarray([0.4, -0.2, -0.3, 0.3], np.float32))
    return before, env._target_ee_pos.copy(), obs, float(env._data.ctrl[env._gripper_ctrl_id]), env._data.qpos.copy()


def test_reference_scenario_code_behaves_as_on_the_reference():
    ref = pytest.importorskip("lerobot_env_so101")
    ours = sgym.ENV_CLASSES["SO101PickCube-v0"](action_scale=0.025)
    theirs = ref.SO101PickCubeGymEnv(action_scale=0.025)
    theirs.model.opt.noslip_iterations = 0  # our scenes have no noslip (MJX lacks it)
    a, b = _scenario(ours, mujoco), _scenario(theirs, mujoco)
    for x, y in zip(a, b):
        if isinstance(x, dict):
            for k in x:
                np.testing.assert_allclose(x[k], y[k], rtol=0, atol=1e-6)
        else:
            np.testing.assert_allclose(x, y, rtol=0, atol=1e-6)
    np.testing.assert_allclose(a[2]["environment_state"][:2], [0.27, 0.04], atol=2e-3)  # the edit reached the physics
    assert not np.allclose(a[0], a[1])  # the step moved the IK target
    ours._target_ee_pos = [0.3, 0.0, 0.2]
    assert np.allclose(ours.state.info.ik_target, [0.3, 0.0, 0.2])
    with pytest.raises(ValueError, match="_target_ee_pos must be 3 finite numbers"):
        ours._target_ee_pos = [np.nan, 0, 0]
    assert ours._z_init.shape == () and ours._arm_ctrl_ids.shape == (5,)
    with pytest.raises(AttributeError):
        ours._no_such_attribute  # noqa: B018
    ours.close()


def test_untouched_data_leaves_the_trajectory_bitwise_alone():
    a, b = sgym.ENV_CLASSES["SO101PickPlace-v0"](), sgym.ENV_CLASSES["SO101PickPlace-v0"]()
    a.reset(seed=3), b.reset(seed=3)
    for _ in range(3):
        _ = a.data.qpos.sum()  # read only
        mujoco.mj_forward(a._model, a._data)
        oa, *_ = a.step(np.asarray([0.1, 0.0, -0.2, 0.5]))
        ob, *_ = b.step(np.asarray([0.1, 0.0, -0.2, 0.5]))
        np.testing.assert_array_equal(np.asarray(a.state.physics.qpos), np.asarray(b.state.physics.qpos))
    assert a._goal_pos.shape == (3,)


def test_step_info_has_the_reference_and_lerobot_success_keys():
    env = sgym.ENV_CLASSES["SO101Reach-v0"]()
    env.reset(seed=0)
    _, _, _, _, info = env.step(np.zeros(4, np.float32))
    assert set(info) == {"succeed", "is_success"} and info["succeed"] is info["is_success"] is False
    env.close()


@pytest.mark.parametrize("name", ["SO101PickCube-v0", "SO101PickPlace-v0"])
def test_task_description_is_the_recorded_task(name):
    """lerobot-eval reads ``task_description``; it is the instruction ``so101-mjx record`` writes."""
    from so101_mjx.envs.registry import task

    env = gym.make(f"so101_mjx/{name}")
    assert env.unwrapped.task_description == task(name).instruction and env.unwrapped.task_description
    env.close()
