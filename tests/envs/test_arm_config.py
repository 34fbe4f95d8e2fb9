"""``home_position`` and ``cartesian_bounds`` as :class:`~so101_mjx.envs.config.ArmConfig` fields (seed 000,
``SO101GymEnv(home_position=..., cartesian_bounds=...)``): the functional env resets the arm there and
clips its IK target to the box, on both backends alike; the defaults are the reference's; bad values
name the field; a config survives its JSON round trip (run.json)."""

import json

import jax
import numpy as np
import pytest

from so101_mjx import make
from so101_mjx.envs.arm import CARTESIAN_BOUNDS, HOME_POSITION
from so101_mjx.envs.base import asdict

HOME = (0.2, -0.3, 0.4, 0.1, -0.5)
BOUNDS = ((0.15, -0.1, 0.05), (0.3, 0.1, 0.25))


def _run(backend: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Arm joints after reset, and the IK target and joints after two full-scale steps (+x, +y, +z)."""
    env = make("SO101PickCube-v0", backend, home_position=HOME, cartesian_bounds=BOUNDS)
    state = jax.jit(env.reset)(jax.random.PRNGKey(0))
    reset_q = np.asarray(env.arm.joint_q(state.physics))
    step = jax.jit(env.step)
    for _ in range(2):
        state = step(state, np.array([1.0, 1.0, 1.0, 0.5]))
    return reset_q, np.asarray(state.info.ik_target), np.asarray(env.arm.joint_q(state.physics))


def test_home_and_bounds_reach_the_functional_env():
    reset, target, _ = _run("c")
    np.testing.assert_allclose(reset, HOME, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(target, BOUNDS[1])  # action_scale 1 m per unit: clipped to the box's max


# soak: the home and bounds are backend-independent JAX (test_home_and_bounds_reach_the_functional_env, on c), and
# MJX equals C for reset and steps in test_joint_mode, test_push_cube and test_stack_cube (slow)
@pytest.mark.soak  # MJX's compile on a CPU
def test_home_and_bounds_are_the_same_on_mjx():
    c_reset, c_target, c_q = _run("c")
    mjx_reset, mjx_target, mjx_q = _run("mjx")
    np.testing.assert_array_equal(mjx_reset, c_reset)
    np.testing.assert_array_equal(mjx_target, c_target)
    np.testing.assert_allclose(mjx_q, c_q, rtol=0, atol=1e-9)


def test_defaults_are_the_references_and_the_fields_round_trip():
    config = make("SO101PickCube-v0", "c").config
    assert config.home_position == HOME_POSITION == (0.0,) * 5
    assert config.cartesian_bounds == CARTESIAN_BOUNDS == ((0.1, -0.3, 0.0), (0.5, 0.3, 0.4))
    custom = make("SO101PickCube-v0", "c", home_position=np.array(HOME), cartesian_bounds=np.array(BOUNDS)).config
    assert custom.home_position == HOME and custom.cartesian_bounds == BOUNDS  # stored as plain tuples
    again = make("SO101PickCube-v0", "c", **json.loads(json.dumps(asdict(custom)))).config
    assert again == custom


@pytest.mark.parametrize("field, value, message", [
    ("home_position", (0.0,) * 6, r"home_position must have shape \(5,\)"),
    ("home_position", (0.0, 0.0, float("nan"), 0.0, 0.0), "home_position must be 5 finite numbers"),
    ("cartesian_bounds", ((0.5, 0.0, 0.0), (0.1, 0.3, 0.4)), "cartesian_bounds must have min <= max"),
    ("cartesian_bounds", ((0.1, 0.0), (0.5, 0.3)), r"cartesian_bounds must have shape \(2, 3\)"),
    ("cartesian_bounds", "wide", "cartesian_bounds must be"),
])
def test_bad_values_name_the_field(field, value, message):
    with pytest.raises(ValueError, match=message):
        make("SO101PickCube-v0", "c", **{field: value})
