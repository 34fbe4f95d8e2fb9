"""Domain randomization: sampled per world and episode, applied by both backends."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from so101_mjx.envs import make
from so101_mjx.sim.randomization import Randomization, nominal, sample


def test_all_ones_is_nominal(model):
    params = sample(model, Randomization(), jax.random.PRNGKey(0), jnp.float64)
    for name, value in nominal(model, jnp.float64).items():
        np.testing.assert_array_equal(params[name], value, err_msg=name)


def test_invalid_range():
    with pytest.raises(ValueError, match=r"randomization.block_mass must be a range"):
        Randomization(block_mass=(0.0, 1.0))
    with pytest.raises(ValueError, match=r"randomization.joint_damping"):
        Randomization(joint_damping=(2.0, 1.0))


@pytest.mark.slow
def test_worlds_differ_and_episodes_redraw():
    env = make("SO101PickCube-v0", backend="c",
               randomization=Randomization(block_mass=(0.5, 2.0), actuator_gain=(0.8, 1.2)))
    s = jax.vmap(env.reset)(jax.random.split(jax.random.PRNGKey(0), 64))
    b = env.mj_model.body("block").id
    mass = np.asarray(s.info["model_params"]["body_mass"][:, b])
    assert mass.min() >= 0.05 - 1e-9 and mass.max() <= 0.2 + 1e-9 and mass.std() > 0.01
    kp = np.asarray(s.info["model_params"]["actuator_gainprm"][:, 0, 0])
    np.testing.assert_allclose(-np.asarray(s.info["model_params"]["actuator_biasprm"][:, 0, 1]), kp)


def _settle(backend, r):
    env = make("SO101PickCube-v0", backend=backend, randomization=r)
    step = jax.jit(env.step)
    s = jax.jit(env.reset)(jax.random.PRNGKey(0))  # an eager MJX reset spends over a minute dispatching ops
    for _ in range(3):
        s = step(s, jnp.asarray([0.0, 0.0, 0.0, 1.0]))
    return s


@pytest.mark.slow
def test_c_backend_applies_block_size_and_gain():
    """A 1.5x block rests 1.5x higher; halving kp makes the arm sag more under gravity."""
    nominal_s = _settle("c", None)
    assert float(nominal_s.obs[16]) == pytest.approx(0.02, abs=1e-3)
    assert float(_settle("c", Randomization(block_size=(1.5, 1.5))).obs[16]) == pytest.approx(0.03, abs=1e-3)
    sag = lambda s: abs(float(s.physics.qpos[1]))  # noqa: E731
    assert sag(_settle("c", Randomization(actuator_gain=(0.5, 0.5)))) > 1.5 * sag(nominal_s) > 0


@pytest.mark.slow  # ~2 min of MJX compiles on a 2-core CPU; the c backend's twin runs by default
def test_mjx_backend_applies_block_size_and_gain():
    s = _settle("mjx", Randomization(block_size=(1.5, 1.5), actuator_gain=(0.5, 0.5)))
    c = _settle("c", Randomization(block_size=(1.5, 1.5), actuator_gain=(0.5, 0.5)))
    assert float(s.obs[16]) == pytest.approx(0.03, abs=1e-3)
    np.testing.assert_allclose(s.physics.qpos[:5], c.physics.qpos[:5], atol=1e-3)


def test_config_with_randomization_round_trips_through_json():
    import json

    from so101_mjx.envs.base import asdict

    r = Randomization(block_mass=(0.5, 2.0))
    env = make("SO101Reach-v0", backend="c", randomization=r)
    again = make("SO101Reach-v0", backend="c", **json.loads(json.dumps(asdict(env.config))))
    assert again.config == env.config
