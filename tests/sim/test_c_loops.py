"""Backend ``c``'s two host loops, ``mujoco.batch`` and our own thread pool, give the same
trajectories bitwise: state, warm start, sensors and the stale-kinematics ``kin_qpos``, with and
without per-world model parameters (randomized, or the voltage sag's torque limits), at any thread count."""

import jax
import numpy as np
import pytest

from so101_mjx.envs import make
from so101_mjx.sim.randomization import Randomization
from so101_mjx.sim.servo import ServoModel, VoltageSag

WORLDS, STEPS = 8, 12


def _trajectory(loop: str, nthread: int, options: dict) -> list[np.ndarray]:
    env = make("SO101PickCube-v0", "c", loop=loop, nthread=nthread, **options)
    reset, step = jax.jit(jax.vmap(env.reset)), jax.jit(jax.vmap(env.step))
    state = reset(jax.random.split(jax.random.PRNGKey(0), WORLDS))
    leaves = jax.tree.leaves(state.physics)
    for k in range(STEPS):
        state = step(state, jax.random.uniform(jax.random.PRNGKey(k), (WORLDS, 4), minval=-1.0, maxval=1.0))
        leaves += jax.tree.leaves(state.physics)
    return [np.asarray(x) for x in leaves]


@pytest.mark.parametrize("options", [
    {}, {"randomization": Randomization(block_mass=(0.5, 2.0), block_size=(0.8, 1.2), actuator_gain=(0.8, 1.2))},
    {"servo_model": ServoModel(voltage_sag=VoltageSag(per_torque=0.05))},
], ids=["nominal", "randomized", "voltage-sag"])
@pytest.mark.slow
def test_batch_loop_equals_pool_loop_bitwise(options):
    pool = _trajectory("pool", 2, options)
    for batch in (_trajectory("batch", 2, options), _trajectory("batch", 1, options)):
        assert len(batch) == len(pool)
        for a, b in zip(pool, batch):
            np.testing.assert_array_equal(a, b)


def test_unknown_loop_is_refused():
    with pytest.raises(ValueError, match=r"loop must be one of \('batch', 'pool'\), got 'fast'"):
        make("SO101Reach-v0", "c", loop="fast")
