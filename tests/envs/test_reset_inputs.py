"""``reset_to`` and ``step`` check values, not only shapes: outside jit a NaN/inf, complex or
non-numeric value is an InputError naming the field; inside jit (where values are unknown) a
non-finite ``reset_to`` value is replaced by the task's ``fixed_reset`` one and counted in
``nonfinite_actions``, and NaN never reaches the state."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from so101_mjx.envs import make
from so101_mjx.errors import InputError

KEY = jax.random.PRNGKey(0)
NON_FINITE = [  # (task, the reset_to arguments, the field named)
    ("SO101PickCube-v0", {"block_xy": [np.nan, 0.0]}, "block_xy"),
    ("SO101PickPlace-v0", {"block_xy": [0.25, 0.05], "goal_xy": [np.inf, 0.0]}, "goal_xy"),
    ("SO101PushCube-v0", {"block_xy": [0.25, -np.inf]}, "block_xy"),
    ("SO101Reach-v0", {"target": [0.25, np.nan, 0.15]}, "target"),
    ("SO101StackCube-v0", {"block_xy": [0.25, 0.05], "bottom_xy": [0.2, np.nan]}, "bottom_xy"),
]


@pytest.fixture(scope="module")
def envs() -> dict:
    return {name: make(name) for name in {case[0] for case in NON_FINITE}}


@pytest.mark.parametrize(("name", "fixed", "field"), NON_FINITE)
def test_non_finite_reset_to_values_are_refused_naming_the_field(envs, name, fixed, field):
    with pytest.raises(InputError, match=f"reset_to: {field} must be \\d finite numbers, got"):
        envs[name].reset_to(KEY, **fixed)


@pytest.mark.parametrize("value", [np.array([0.25 + 1j, 0.0]), ["a", "b"], np.array([0.25, 0.0], object), [True, False],
                                   [[0.25], [0.0, 1.0]]])
def test_complex_text_object_and_bool_block_xy_are_refused(envs, value):
    with pytest.raises(InputError, match="reset_to: block_xy must be real numbers"):
        envs["SO101PickCube-v0"].reset_to(KEY, block_xy=value)


def test_a_complex_block_xy_is_refused_under_jit(envs):
    with pytest.raises(InputError, match="reset_to: block_xy must be real numbers"):
        jax.jit(envs["SO101PickCube-v0"].reset_to)(KEY, block_xy=jnp.array([0.25 + 1j, 0.0]))


def finite_state(state) -> bool:
    leaves = jax.tree.leaves((state.physics, state.obs, state.reward, state.metrics, state.info.task,
                              state.info.ik_target))
    return all(bool(jnp.all(jnp.isfinite(x))) for x in leaves if jnp.issubdtype(x.dtype, jnp.floating))


@pytest.mark.parametrize(("name", "fixed", "field"), NON_FINITE)
def test_under_jit_non_finite_values_are_replaced_by_the_fixed_reset_and_counted(envs, name, fixed, field):
    env = envs[name]
    state = jax.jit(env.reset_to)(KEY, **fixed)
    assert finite_state(state)
    assert int(state.info.nonfinite_actions) == 1 and float(state.metrics["nonfinite_actions"]) == 1
    expected = jax.jit(env.reset_to)(KEY, **{**fixed, field: env.fixed_reset[field]})
    np.testing.assert_array_equal(state.obs, expected.obs)
    assert int(expected.info.nonfinite_actions) == 0
    after = jax.jit(env.step)(state, jnp.zeros(4))
    assert finite_state(after) and int(after.info.nonfinite_actions) == 1


def test_under_jit_each_replaced_value_counts(envs):
    env = envs["SO101PickPlace-v0"]
    state = jax.jit(env.reset_to)(KEY, block_xy=[np.nan, 0.0], goal_xy=[0.0, np.inf])
    assert finite_state(state) and int(state.info.nonfinite_actions) == 2
    vmapped = jax.jit(jax.vmap(env.reset_to))(jax.random.split(KEY, 3),
                                              block_xy=jnp.array([[0.25, 0.05], [np.nan, 0.0], [0.2, 0.0]]))
    assert finite_state(vmapped)
    np.testing.assert_array_equal(vmapped.info.nonfinite_actions, [0, 1, 0])


def test_a_complex_action_is_refused_in_and_outside_jit(envs):
    env = envs["SO101PickCube-v0"]
    state = env.reset(KEY)
    action = jnp.array([0.1 + 1j, 0.0, 0.0, 1.0])
    with pytest.raises(InputError, match="action must be real numbers"):
        env.step(state, action)
    with pytest.raises(InputError, match="action must be real numbers"):
        jax.jit(env.step)(state, action)
    with pytest.raises(InputError, match="action must be real numbers"):
        env.step(state, ["a", 0, 0, 1])
