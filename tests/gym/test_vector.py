"""SO101VectorEnv (so101_mjx.gym.vector): the gym env's episodes, B worlds per call, without lerobot."""

import gymnasium as gym
import numpy as np
import pytest

import so101_mjx.gym  # noqa: F401  # registers the gym ids
from so101_mjx.gym.mujoco_env import GymRenderingSpec
from so101_mjx.gym.vector import SO101VectorEnv

TASK = "SO101PickCube-v0"


@pytest.fixture(scope="module")
def vec():
    env = SO101VectorEnv(TASK, 3)
    yield env
    env.close()


def test_spaces_and_metadata_are_the_gym_envs_batched(vec):
    single = gym.make(f"so101_mjx/{TASK}")
    assert vec.single_observation_space == single.observation_space
    assert vec.single_action_space == single.action_space
    assert vec.observation_space["agent_pos"].shape == (3, *single.observation_space["agent_pos"].shape)
    assert vec.action_space.shape == (3, 4)
    assert vec.metadata["render_fps"] == 10 and vec.metadata["autoreset_mode"] == gym.vector.AutoresetMode.NEXT_STEP
    assert vec.call("_max_episode_steps") == (single.spec.max_episode_steps,) * 3
    assert vec.call("task_description") == (single.unwrapped.task_description,) * 3
    with pytest.raises(AttributeError, match="no per-world attribute 'colour'"):
        vec.call("colour")
    single.close()


@pytest.mark.parametrize("options", [{}, {"control_mode": "joint"}], ids=["cartesian", "joint"])
def test_worlds_follow_the_gym_env_from_the_same_seeds(options):
    """Each world's observations, rewards and flags equal the gym env's run from the same seed and actions."""
    seeds, steps = [11, 12], 8
    vec = SO101VectorEnv(TASK, 2, random_block_position=True, **options)
    low, high = vec.single_action_space.low, vec.single_action_space.high
    actions = np.random.default_rng(0).uniform(low, high, (steps, 2, len(low))).astype(np.float32)
    obs, _ = vec.reset(seed=seeds)
    batched = [vec.step(a) for a in actions]
    for i, seed in enumerate(seeds):
        single = gym.make(f"so101_mjx/{TASK}", random_block_position=True, **options)
        first, _ = single.reset(seed=seed)
        for key in first:
            np.testing.assert_allclose(obs[key][i], first[key], atol=1e-5, err_msg=f"reset {key}")
        for t in range(steps):
            o, r, term, trunc, info = single.step(actions[t, i])
            b_obs, b_r, b_term, b_trunc, b_info = batched[t]
            for key in o:
                np.testing.assert_allclose(b_obs[key][i], o[key], atol=1e-4, err_msg=f"step {t} {key}")
            assert (b_term[i], b_trunc[i], b_info["is_success"][i]) == (term, trunc, info["is_success"])
            assert b_r[i] == pytest.approx(r, abs=1e-4)
        single.close()
    vec.close()


def test_an_ended_world_resets_on_its_next_step_alone():
    env = SO101VectorEnv(TASK, 2, episode_length=3, random_block_position=True)
    obs, _ = env.reset(seed=5)
    hold = np.zeros((2, 4), np.float32)
    for _ in range(3):
        _, _, terminated, truncated, _ = env.step(hold)
    assert truncated.all() and not terminated.any()
    again, reward, terminated, truncated, info = env.step(hold)  # NEXT_STEP: the reset step
    assert not (terminated.any() or truncated.any() or info["is_success"].any()) and (reward == 0).all()
    assert not np.array_equal(again["environment_state"], obs["environment_state"])  # each generator went on
    fresh = SO101VectorEnv(TASK, 2, episode_length=3, random_block_position=True)
    first, _ = fresh.reset(seed=5)
    np.testing.assert_array_equal(first["environment_state"], obs["environment_state"])  # the same seeds
    assert not np.array_equal(obs["environment_state"][0], obs["environment_state"][1])  # seed + i per world
    _, _, _, truncated, _ = env.step(hold)
    assert not truncated.any()  # the episode counter restarted
    env.close(), fresh.close()


@pytest.mark.parametrize(("actions", "match"), [(np.zeros((2, 3)), r"actions must have shape \(2, 4\)"),
                                                 (np.full((2, 4), "x"), "actions must")])
def test_bad_actions_are_one_line(actions, match):
    env = SO101VectorEnv(TASK, 2)
    env.reset(seed=0)
    with pytest.raises(ValueError, match=match):
        env.step(actions)
    env.close()


def test_bad_construction_and_seeds_are_one_line():
    with pytest.raises(ValueError, match="num_envs"):
        SO101VectorEnv(TASK, 0)
    with pytest.raises(ValueError, match="image_obs"):
        SO101VectorEnv(TASK, 2, image_obs="yes")
    with pytest.raises(ValueError, match="image_cameras must be distinct cameras of the scene"):
        SO101VectorEnv(TASK, 2, image_obs=True, image_cameras=("front", "side"))
    with pytest.raises(ValueError, match="image_cameras change only the rendered frames of pixels: "
                                         "they need image_obs=True"):
        SO101VectorEnv(TASK, 2, image_cameras=("wrist",))
    with pytest.raises(ValueError, match="image_quality must be one of"):
        SO101VectorEnv(TASK, 2, image_obs=True, image_quality="ultra")
    env = SO101VectorEnv(TASK, 2)
    with pytest.raises(ValueError, match="2 seeds"):
        env.reset(seed=[1, 2, 3])
    with pytest.raises(ValueError, match="step before reset"):
        env.step(np.zeros((2, 4)))
    env.close()


@pytest.mark.slow  # render workers
def test_render_gives_each_worlds_front_frame():
    env = SO101VectorEnv(TASK, 2, render_size=(24, 32), random_block_position=True)
    env.reset(seed=0)
    frames = np.stack(env.call("render"))
    assert frames.shape == (2, 24, 32, 3) and frames.dtype == np.uint8
    assert not np.array_equal(frames[0], frames[1])  # two block positions
    env.close()


@pytest.mark.slow  # render workers
def test_a_render_call_renders_the_frames_read_and_keeps_their_state():
    """lerobot-eval keeps ``call("render")[:n]``: only those worlds are rendered, in one batch, at the state of
    the call."""
    env = SO101VectorEnv(TASK, 3, render_size=(24, 32), random_block_position=True)
    env.reset(seed=0)
    everything = env.render()
    frames = env.call("render")
    batches = []
    renderer = env._renderers["front"]
    render = renderer.render
    renderer.render = lambda qpos, marks: batches.append(len(qpos)) or render(qpos, marks)
    env.step(np.ones((3, 4), np.float32))  # the frames read below are still of the reset state
    first = frames[:1]
    assert batches == [1] and np.array_equal(first[0], everything[0])
    assert frames[0] is first[0] and frames[-1] is not None and batches == [1, 1]
    assert all(np.array_equal(a, b) for a, b in zip(frames, everything)) and batches == [1, 1, 1]
    assert len(frames) == 3 and frames[1:3] == tuple(frames)[1:3]
    with pytest.raises(IndexError):
        frames[3]
    env.close()


@pytest.mark.slow  # render workers
@pytest.mark.parametrize("frames", [
    {}, {"image_cameras": ("front", "wrist"), "image_quality": "fast"},
    {"image_cameras": ("front", "wrist"), "image_quality": "fast",
     "camera_specs": {"wrist": "menagerie_wrist", "front": {"fovy": 30.0, "latency": 2}}}])
def test_image_observations_are_the_gym_envs_frames(frames):
    """With image_obs, each world's pixels (the front camera as shipped, a follower's two cameras from the light
    render model, or those through the user's lenses with a front camera two ticks late) are the gym env's from
    the same seed and actions: bit for bit at the reset; after steps, where the batched and the single float32
    states differ by ~1e-6, in all but a few pixels."""
    seeds, steps, size = [3, 4], 6, (40, 48)
    vec = SO101VectorEnv("SO101PickPlace-v0", 2, render_size=size, image_obs=True, random_block_position=True,
                         **frames)
    single = gym.make("so101_mjx/SO101PickPlace-v0", image_obs=True, random_block_position=True,
                      render_spec=GymRenderingSpec(height=size[0], width=size[1]), **frames)
    cameras = frames.get("image_cameras", ("front",))
    assert vec.single_observation_space == single.observation_space and list(vec.image_cameras) == list(cameras)
    assert vec.observation_space["pixels"][cameras[-1]].shape == (2, *size, 3)
    obs, _ = vec.reset(seed=seeds)
    first, _ = single.reset(seed=seeds[1])
    for camera in cameras:
        assert np.array_equal(obs["pixels"][camera][1], first["pixels"][camera]), camera
    assert not np.array_equal(obs["pixels"]["front"][0], obs["pixels"]["front"][1])  # two block placements
    actions = np.random.default_rng(0).uniform(-1, 1, (steps, 2, 4)).astype(np.float32)
    for t in range(steps):
        obs, *_ = vec.step(actions[t])
        o, *_ = single.step(actions[t, 1])
        for camera in cameras:
            differ = np.any(obs["pixels"][camera][1] != o["pixels"][camera], axis=-1)
            assert differ.mean() < 0.005, f"step {t}, {camera}: {differ.mean():.4f} of the pixels differ"
        np.testing.assert_allclose(obs["agent_pos"][1], o["agent_pos"], atol=1e-4)
    frames = vec.render()  # the observation's frames
    assert all(np.array_equal(f, p) for f, p in zip(frames, obs["pixels"]["front"]))
    vec.close(), single.close()


@pytest.mark.slow  # render workers
def test_a_lagged_camera_shows_each_worlds_frame_its_latency_back_and_restarts_with_its_episode():
    """A camera of latency 2 shows the frame the same camera without latency showed two steps before; a world that
    resets shows its new first frame at once, and it stands for the older ones."""
    options = {"render_size": (24, 32), "image_obs": True, "image_quality": "fast", "random_block_position": True}
    lagged = SO101VectorEnv(TASK, 2, camera_specs={"front": {"fovy": 30.0, "latency": 2}}, episode_length=3,
                            **options)
    now = SO101VectorEnv(TASK, 2, camera_specs={"front": {"fovy": 30.0}}, episode_length=3, **options)
    shown, drawn = [lagged.reset(seed=5)[0]["pixels"]["front"]], [now.reset(seed=5)[0]["pixels"]["front"]]
    assert np.array_equal(shown[0], drawn[0])
    actions = np.array([[0.0, 0.0, 1.0, 0.0], [1.0, 0.0, 0.0, 1.0]], np.float32)
    for _ in range(4):  # episodes of 3 steps: the fourth step resets both worlds
        shown.append(lagged.step(actions)[0]["pixels"]["front"])
        drawn.append(now.step(actions)[0]["pixels"]["front"])
    assert np.array_equal(shown[1], drawn[0]) and np.array_equal(shown[2], drawn[0])
    assert np.array_equal(shown[3], drawn[1]) and not np.array_equal(drawn[1], drawn[0])
    assert np.array_equal(shown[4], drawn[4])  # the new episode's first frame
    lagged.close(), now.close()


def test_camera_specs_are_checked_in_one_line():
    with pytest.raises(ValueError, match="camera_specs change only the rendered frames of pixels: "
                                         "they need image_obs=True"):
        SO101VectorEnv(TASK, 2, camera_specs={"front": {"fovy": 30.0, "latency": 1}})
    with pytest.raises(ValueError, match=r"camera_specs names \['wrist'\], which are not among image_cameras"):
        SO101VectorEnv(TASK, 2, image_obs=True, camera_specs={"wrist": "menagerie_wrist"})
    with pytest.raises(ValueError, match=r"camera_specs\['front'\]"):
        SO101VectorEnv(TASK, 2, image_obs=True, camera_specs={"front": {"fovy": 30.0, "latency": -1}})
