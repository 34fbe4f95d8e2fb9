"""The gymnasium envs' value checks: an action or IK target that is not real numbers (objects,
complex, text) is an InputError (a ValueError) naming it, never a TypeError or a dropped imaginary
part; NaN/inf actions still step (held and counted inside jit)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import so101_mjx.gym as sgym
from so101_mjx.errors import InputError


@pytest.fixture(scope="module")
def env():
    env = sgym.SO101PickCubeGymEnv()
    env.reset(seed=0)
    yield env
    env.close()


@pytest.mark.parametrize("action", [np.array([{}, 0, 0, 0], object), np.array([0.0, 0.0, 0.0, None], object),
                                    np.array([0.1 + 1j, 0, 0, 1]), "abcd", [0, 0, 0, "x"], [[0], [0, 0], 0, 0],
                                    np.ones(4, bool)])
def test_step_refuses_what_is_not_real_numbers(env, action):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no ComplexWarning: nothing is dropped silently
        with pytest.raises(InputError, match="action must be real numbers"):
            env.step(action)


def test_step_takes_ints_and_counts_non_finite(env):
    env.reset(seed=0)
    env.step([0, 0, 0, 1])
    env.step([np.nan, 0.0, 0.0, 1.0])
    assert int(env.state.info.nonfinite_actions) == 1


def test_target_ee_pos_refuses_complex(env):
    with pytest.raises(InputError, match="_target_ee_pos must be real numbers"):
        env._target_ee_pos = np.array([0.3 + 1j, 0.0, 0.2])


def test_seven_dof_adapter_refuses_objects():
    with pytest.warns(UserWarning, match="discards the rotation deltas"):
        adapter = sgym.SevenDofToFourDofAdapter(sgym.SO101PickCubeGymEnv())
    with pytest.raises(InputError, match="action must be real numbers"):
        adapter.action(np.array([{}] * 7, object))
    np.testing.assert_array_equal(adapter.action(np.arange(7)), [0, 1, 2, 6])
