"""MJX's Warp implementation (``impl="warp"``) against impl ``"jax"``.

Warp runs on a CPU device as well (measured: warp-lang 1.19.0, mujoco-warp 3.17.0, mujoco-mjx
3.17.0, JAX 0.10.2 on x86-64 CPU; the first call compiles Warp's kernels, cached under
``~/.cache/warp``). Skipped where mujoco_warp is not installed (``pip install -e ".[warp]"``).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("mujoco_warp")

from so101_mjx.sim.physics import MjxPhysics

SUBSTEPS = 5


def _states(model, dtype):
    """Two worlds at qpos0 (block resting), arm commanded to two different poses: (qpos, qvel, ctrl0, ctrl)."""
    qpos = np.tile(model.qpos0, (2, 1))
    ctrl = np.zeros((2, model.nu))
    ctrl[0, :5] = [0.3, -0.4, 0.5, 0.2, -0.3]
    ctrl[1, :5] = [-0.2, 0.3, -0.3, -0.4, 0.6]
    ctrl[:, 5] = [0.2, 1.0]
    return (jnp.asarray(qpos, dtype), jnp.zeros((2, model.nv), dtype), jnp.zeros((2, model.nu), dtype),
            jnp.asarray(ctrl, dtype))


def _run(physics, qpos, qvel, ctrl0, ctrl):
    state = jax.jit(jax.vmap(physics.init))(qpos, qvel, ctrl0)
    return jax.jit(jax.vmap(lambda s, c: physics.step(s, c, SUBSTEPS)))(state, ctrl)


def test_warp_step_matches_jax_impl(model):
    """One vmapped physics step (5 substeps, 2 worlds): Warp in float32 vs MJX's JAX impl in float64."""
    warp = _run(MjxPhysics(model, impl="warp"), *_states(model, jnp.float32))
    ref = _run(MjxPhysics(model, impl="jax"), *_states(model, jnp.float64))
    assert warp.qpos.dtype == jnp.float32
    moved = np.abs(np.asarray(ref.qpos) - np.asarray(model.qpos0)).max()
    assert moved > 1e-4  # the arm moved: the comparison is not of two resting states
    # float32 rounding (eps 1.2e-7) of values ~1: measured 1.2e-8 qpos, 1.5e-7 qvel, 1.8e-7 sensors
    np.testing.assert_allclose(np.asarray(warp.qpos), np.asarray(ref.qpos), rtol=0, atol=1e-7)
    np.testing.assert_allclose(np.asarray(warp.qvel), np.asarray(ref.qvel), rtol=0, atol=1e-6)
    np.testing.assert_allclose(np.asarray(warp.sensordata), np.asarray(ref.sensordata), rtol=0, atol=1e-6)
    np.testing.assert_allclose(np.asarray(warp.time), SUBSTEPS * model.opt.timestep, rtol=1e-6)


def test_warp_rejects_float64_state(model):
    with pytest.raises(ValueError, match="float32 only"):
        _run(MjxPhysics(model, impl="warp"), *_states(model, jnp.float64))
