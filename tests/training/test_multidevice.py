"""PPO over 2 local devices (``pmap``, as on a multi-GPU host).

The host's CPU is split into 2 XLA devices (``XLA_FLAGS=--xla_force_host_platform_device_count=2``),
which must be set before JAX initializes: each run is a subprocess. The tiny preset trains,
evaluates and checkpoints over both devices (the saved env states hold 4 envs per device); on
backend ``c`` (whose host callbacks the two devices make concurrently: ``CPhysics`` serializes
them) the params equal those of Brax's own ``ppo.train`` on the same two devices, bitwise.
"""

import json
import os
import subprocess
import sys

import pytest

from so101_mjx.training import checkpoint

SCRIPT = r"""
import json, sys
from pathlib import Path
import jax, numpy as np
from so101_mjx.training import checkpoint, presets, ppo

backend, out = sys.argv[1], Path(sys.argv[2])
last, metrics = ppo.train("SO101Reach-v0", "tiny", presets.preset("SO101Reach-v0", "tiny"), out, backend=backend,
                          seed=3)
with np.load(last / checkpoint.STATE_FILE) as state:
    env_obs_shape = list(state[".env.obs"].shape)
report = {"devices": jax.local_device_count(), "steps": [int(p.name) for p in checkpoint.steps(out)],
          "env_obs_shape": env_obs_shape, "success": float(metrics["eval/episode_final_success"])}
if backend == "c":  # Brax's own loop on the same devices, same seed
    import functools
    from brax.training.agents.ppo import train as ppo_train
    from so101_mjx.training import networks
    from so101_mjx.training import brax_env as envs
    preset = presets.preset("SO101Reach-v0", "tiny")
    env = envs.make_env("SO101Reach-v0", preset.env_overrides(), "c")
    from unittest import mock
    from so101_mjx.training.ppo_loop import replicate
    # brax 0.14.2's ppo.train calls jax.device_put_replicated, which jax 0.10 removed: for this call only
    with mock.patch.object(jax, "device_put_replicated", replicate, create=True):
        _, theirs, _ = ppo_train.train(
            environment=env, wrap_env_fn=functools.partial(envs.wrap_env_fn, success_bonus=preset.success_bonus),
            episode_length=env.episode_length, network_factory=networks.network_factory(**preset.network()), seed=3,
            deterministic_eval=True, use_pmap_on_reset=False, **preset.loop_kwargs())
    ours = checkpoint.load(last)[1]
    report["equal_to_brax"] = all(np.array_equal(np.asarray(a), np.asarray(b))
                                  for a, b in zip(jax.tree.leaves(ours), jax.tree.leaves(theirs)))
print("REPORT " + json.dumps(report))
"""


def two_devices() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != checkpoint.KILL_ENV}
    env["JAX_PLATFORMS"] = "cpu"
    env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=2".strip()
    return env


def run_two_devices(backend: str, out) -> dict:
    result = subprocess.run([sys.executable, "-c", SCRIPT, backend, str(out)], env=two_devices(),
                            capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    (line,) = [line for line in result.stdout.splitlines() if line.startswith("REPORT ")]
    report = json.loads(line.removeprefix("REPORT "))
    assert report["devices"] == 2 and report["steps"] == [128, 256]
    assert report["env_obs_shape"] == [2, 4, 20]  # 8 envs: 4 per device, saved for an exact resume
    assert 0 <= report["success"] <= 1
    return report


@pytest.mark.slow  # a training run and Brax's (~60 s)
def test_two_devices_on_backend_c_equal_brax(tmp_path):
    assert run_two_devices("c", tmp_path / "run")["equal_to_brax"]


@pytest.mark.soak
def test_two_devices_on_backend_mjx(tmp_path):
    """~4.5 min on this shared 2-core CPU (MJX compiles of the pmapped epoch and the eval)."""
    run_two_devices("mjx", tmp_path / "run")
