"""Termination when the block leaves the area (seed 000, SO101PickCubeGymEnv.step and
SO101PickPlaceGymEnv.step) and ``random_state`` (seed 000, MujocoGymEnv(seed): "Seed for random_state")."""

import mujoco
import numpy as np
import pytest

import so101_mjx.gym as sgym


def _step_with_block_at(env, xy):
    """Reset, move the block (resting) to ``xy`` through ``_data``, one hold step: (terminated, succeed)."""
    env.reset(seed=0)
    env._data.jnt("block").qpos[:2] = xy
    mujoco.mj_forward(env._model, env._data)
    _, _, terminated, truncated, info = env.step(np.array([0.0, 0.0, 0.0, 1.0]))
    assert not truncated
    return terminated, info["succeed"]


# PickCube: the sampling box [0.2, 0.4] x [-0.1, 0.1] grown by 5 cm; PickPlace: the workspace [0.08, 0.4] x [-0.2, 0.2]
CASES = {
    "SO101PickCube-v0": [((0.44, 0.0), False), ((0.46, 0.0), True), ((0.3, -0.16), True), ((0.16, 0.14), False)],
    "SO101PickPlace-v0": [((0.39, 0.19), False), ((0.3, 0.21), True), ((0.07, 0.0), True), ((0.1, -0.19), False)],
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_block_leaving_the_area_terminates(name):
    """Seed 000, step(): terminated = success or the block out of bounds, as the reference decides."""
    ref = pytest.importorskip("lerobot_env_so101")
    ours = sgym.ENV_CLASSES[name](action_scale=0.025)
    theirs = getattr(ref, type(ours).__name__)(action_scale=0.025)
    for xy, out in CASES[name]:
        assert _step_with_block_at(ours, xy) == (out, False), xy
        assert _step_with_block_at(theirs, xy) == (out, False), xy
    ours.close()


def test_random_state_is_seeded_by_the_constructor():
    """Seed 000, random_state: a RandomState seeded with ``seed``, independent of reset(seed)."""
    ref = pytest.importorskip("lerobot_env_so101")
    env = sgym.SO101PickPlaceGymEnv(seed=11, random_block_position=True)
    assert isinstance(env.random_state, np.random.RandomState) and env.random_state is env._random
    expected = np.random.RandomState(11).rand(4)
    np.testing.assert_array_equal(env.random_state.rand(4), expected)
    np.testing.assert_array_equal(ref.SO101PickPlaceGymEnv(seed=11).random_state.rand(4), expected)
    a, _ = env.reset(seed=2)
    env.random_state.rand(100)  # drawing from it does not move the episodes
    b, _ = env.reset(seed=2)
    np.testing.assert_array_equal(a["environment_state"], b["environment_state"])
    assert sgym.SO101GymEnv(seed=3).random_state.rand() == np.random.RandomState(3).rand()
