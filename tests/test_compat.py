"""so101_mjx.compat: jax.device_put_replicated for brax 0.14.2 on jax >= 0.10."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import so101_mjx  # noqa: F401  (installs the shim when missing)
from so101_mjx import compat


def test_device_put_replicated_stacks_one_copy_per_device():
    tree = {"w": jnp.arange(6.0).reshape(2, 3), "b": np.float32(1.5), "n": {"k": jnp.ones(4, jnp.int32)}}
    devices = jax.local_devices()
    out = compat.device_put_replicated(tree, devices)
    assert out["w"].shape == (len(devices), 2, 3) and out["n"]["k"].shape == (len(devices), 4)
    for i in range(len(devices)):
        np.testing.assert_array_equal(out["w"][i], tree["w"])
        assert float(out["b"][i]) == 1.5
    assert out["w"].sharding.mesh.axis_names == ("i",)
    assert out["n"]["k"].dtype == jnp.int32


def test_installed_only_when_missing(monkeypatch):
    assert hasattr(jax, "device_put_replicated")  # native, or ours after `import so101_mjx`
    assert compat.install() is False  # present now: never overwritten
    monkeypatch.delattr(jax, "device_put_replicated")
    assert compat.install() is True and jax.device_put_replicated is compat.device_put_replicated


def test_brax_ppo_finds_it():
    ppo = pytest.importorskip("brax.training.agents.ppo.train")
    assert callable(ppo.jax.device_put_replicated)
