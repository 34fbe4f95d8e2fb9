"""PPO over 2 local devices (``pmap``, as on a multi-GPU host).

The host's CPU is split into 2 XLA devices (``XLA_FLAGS=--xla_force_host_platform_device_count=2``),
which must be set before JAX initializes: each run is a subprocess. On backend ``mjx`` the tiny
preset trains, evaluates and checkpoints over both devices (the saved env states hold 4 envs per
device); backend ``c`` is refused in one line (its MuJoCo C pool of MjData would be shared by the
devices' concurrent calls).
"""

import json
import os
import subprocess
import sys

import pytest

from train import checkpoint

SCRIPT = r"""
import json, sys
from pathlib import Path
import jax, numpy as np
from train import checkpoint, config, ppo

backend, out = sys.argv[1], Path(sys.argv[2])
last, metrics = ppo.train("SO101Reach-v0", "tiny", config.preset("SO101Reach-v0", "tiny"), out, backend=backend, seed=3)
with np.load(last / checkpoint.STATE_FILE) as state:
    env_obs_shape = list(state[".env.obs"].shape)
print("REPORT " + json.dumps({"devices": jax.local_device_count(), "steps": [int(p.name) for p in checkpoint.steps(out)],
                              "env_obs_shape": env_obs_shape, "success": float(metrics["eval/episode_final_success"])}))
"""


def two_devices() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != checkpoint.KILL_ENV}
    env["JAX_PLATFORMS"] = "cpu"
    env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=2".strip()
    return env


def test_backend_c_on_two_devices_is_refused_in_one_line(tmp_path):
    argv = [sys.executable, "-m", "train.ppo", "--env", "SO101Reach-v0", "--preset", "tiny", "--backend", "c",
            "--out", str(tmp_path / "run")]
    result = subprocess.run(argv, env=two_devices(), capture_output=True, text=True, timeout=300)
    assert result.returncode == 2, result.stdout[-2000:] + result.stderr[-3000:]
    lines = [line for line in result.stderr.splitlines() if "warp" not in line]  # mujoco_warp's import notice
    assert len(lines) == 1 and "backend c cannot train over 2 local devices (pmap)" in lines[0], result.stderr
    assert not (tmp_path / "run" / checkpoint.CHECKPOINTS).exists()


@pytest.mark.slow
def test_two_devices_on_backend_mjx(tmp_path):
    """~4.5 min on this shared 2-core CPU (MJX compiles of the pmapped epoch and the eval)."""
    result = subprocess.run([sys.executable, "-c", SCRIPT, "mjx", str(tmp_path / "run")], env=two_devices(),
                            capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    (line,) = [line for line in result.stdout.splitlines() if line.startswith("REPORT ")]
    report = json.loads(line.removeprefix("REPORT "))
    assert report["devices"] == 2 and report["steps"] == [128, 256]
    assert report["env_obs_shape"] == [2, 4, 20]  # 8 envs: 4 per device, saved for an exact resume
    assert 0 <= report["success"] <= 1
