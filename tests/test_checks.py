"""so101_mjx._checks' memory check: an estimate past what the machine has is one InputError line naming
the setting, the estimate and the machine's memory."""

import pytest

from so101_mjx import _checks as checks
from so101_mjx.errors import InputError


def test_host_memory_is_the_machines_ram():
    with open("/proc/meminfo") as f:
        total = next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemTotal:"))
    assert abs(checks.host_memory() - total) < 0.01 * total
    assert checks.machine_memory() == (checks.host_memory(), "RAM")


def test_fits_memory_refuses_past_the_machines_memory(monkeypatch):
    monkeypatch.setattr(checks, "host_memory", lambda: 8 * 2**30)
    checks.fits_memory("--num-envs 64", 2**30, "worlds")  # fits: nothing happens
    with pytest.raises(InputError) as err:
        checks.fits_memory("--num-envs 4096", 9 * 2**30, "4096 worlds of 2 MiB", device=True)  # a CPU device: the RAM
    assert (str(err.value)
            == "--num-envs 4096 needs about 9.0 GiB (4096 worlds of 2 MiB); this machine has 8.0 GiB of RAM")
    monkeypatch.setattr(checks, "host_memory", lambda: 0)  # unknown: nothing is refused
    checks.fits_memory("--num-envs 4096", 9 * 2**60, "worlds")
