"""SO101Solver's database size is bounded by the machine's memory: its FK database, and the retrieval's
(targets x seed_db_size) distances, are estimated and refused before they are allocated."""

import numpy as np
import pytest

from so101_mjx import _checks as checks
from so101_mjx.errors import InputError
from so101_mjx.ik.solvers.solver import SO101Solver


def test_a_database_past_the_machines_memory_is_refused_at_construction():
    with pytest.raises(InputError,
                       match=r"seed_db_size = 1000000000000 needs about .* GiB \(its FK database\); this machine has"):
        SO101Solver(seed_db_size=10**12)


def test_a_retrieval_past_the_machines_memory_is_refused_before_solving(monkeypatch):
    solver = SO101Solver(seed_db_size=64, num_samples=4)
    targets = np.tile([0.2, 0.0, 0.1], (1000, 1))
    monkeypatch.setattr(checks, "host_memory", lambda: 64 * 1000 * 12 - 1)  # one byte short of the estimate
    with pytest.raises(InputError, match=r"seed_db_size = 64 for targets \(1000,\) needs about .* \(distances\)"):
        solver.get_ik(targets)
