"""so101_mjx._compat: MuJoCo C's quaternion integration in MJX, and no patch of JAX."""

import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from so101_mjx import _compat as compat
from so101_mjx.training.ppo_loop import replicate


def test_replicate_stacks_one_copy_per_device():
    tree = {"w": jnp.arange(6.0).reshape(2, 3), "b": np.float32(1.5), "n": {"k": jnp.ones(4, jnp.int32)}}
    devices = jax.local_devices()
    out = replicate(tree, devices)
    assert out["w"].shape == (len(devices), 2, 3) and out["n"]["k"].shape == (len(devices), 4)
    for i in range(len(devices)):
        np.testing.assert_array_equal(out["w"][i], tree["w"])
        assert float(out["b"][i]) == 1.5
    assert out["w"].sharding.mesh.axis_names == ("i",)
    assert out["n"]["k"].dtype == jnp.int32


def test_the_library_does_not_patch_jax():
    code = ("import jax; had = hasattr(jax, 'device_put_replicated'); before = getattr(jax, "
            "'device_put_replicated', None); import so101_mjx.training.ppo, so101_mjx.envs; "
            "assert hasattr(jax, 'device_put_replicated') == had and getattr(jax, 'device_put_replicated', "
            "None) is before")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def _c_quat_integrate(quat, vel, dt):
    import mujoco

    out = np.array(quat, np.float64)
    mujoco.mju_quatIntegrate(out, np.asarray(vel, np.float64), dt)
    return out


@pytest.mark.parametrize("speed", [0.0, 1e-14, 1e-10, 3e-9, 1e-3, 2.0])
def test_quat_integrate_matches_mujoco_c(speed):
    """The MJX orientation integrator installed by building an MJX backend equals
    mju_quatIntegrate, tiny velocities included."""
    from mujoco.mjx._src import math as mjx_math

    from so101_mjx.robot.scenes import load_model
    from so101_mjx.sim.physics import make_physics

    make_physics("mjx", load_model("reach"))

    quat = np.array([0.9, 0.1, -0.3, 0.2]) / np.linalg.norm([0.9, 0.1, -0.3, 0.2])
    vel = speed * np.array([0.3, -0.8, 0.52])
    ours = np.asarray(mjx_math.quat_integrate(jnp.asarray(quat), jnp.asarray(vel), 0.002))  # float64 (conftest)
    np.testing.assert_allclose(ours, _c_quat_integrate(quat, vel, 0.002), rtol=0, atol=5e-16)  # a few ulps
    assert np.all(np.isfinite(
        jax.grad(lambda v: compat.quat_integrate(jnp.asarray(quat), v, 0.002).sum())(jnp.asarray(vel))))


def test_import_leaves_mjx_alone():
    """``import so101_mjx`` does not patch MJX; building an MJX backend does."""
    code = ("import so101_mjx; from mujoco.mjx._src import math as m; from so101_mjx import _compat as compat; "
            "assert m.quat_integrate is compat.MJX_QUAT_INTEGRATE; "
            "from so101_mjx.sim.physics import make_physics; make_physics('mjx', so101_mjx.load_model('reach')); "
            "assert m.quat_integrate is compat.quat_integrate")
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "JAX_PLATFORMS": "cpu"})


def test_mjx_upstream_quat_integrate_drops_tiny_rotations():
    """Why the fix exists: mujoco-mjx's own integrator leaves a quaternion unchanged at 1e-10 rad/s.
    When this fails, upstream fixed it and the shim in so101_mjx._compat can go."""
    quat = np.array([1.0, 0.0, 0.0, 0.0])
    vel = np.array([4.8e-9, -1.5e-9, 0.0])
    upstream = np.asarray(compat.MJX_QUAT_INTEGRATE(jnp.asarray(quat), jnp.asarray(vel), 0.5))
    np.testing.assert_array_equal(upstream, quat)
    assert np.abs(_c_quat_integrate(quat, vel, 0.5) - quat).max() > 1e-9
