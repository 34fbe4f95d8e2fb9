"""Library inputs of the IK: a saved seed network is checked on load; a NaN seed or NaN candidates
never come back as joints reported valid."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from so101_mjx.errors import InputError
from so101_mjx.ik import iterative as ik
from so101_mjx.ik import learned
from so101_mjx.robot.kinematics import Kinematics
from so101_mjx.robot.scenes import ARM_JOINTS, load_model


@pytest.fixture(scope="module")
def seednet(tmp_path_factory) -> Path:
    model = load_model("so101")
    lo, hi = ik.joint_limits(model)
    path = tmp_path_factory.mktemp("seednet") / "net.npz"
    learned.save(learned.init(Kinematics.from_model(model, ARM_JOINTS), lo, hi, hidden=(8,), heads=2), path)
    return path


@pytest.mark.parametrize(("key", "change", "message"), [
    ("params/params/Dense_0/kernel", lambda a: a * np.nan, "params/params/Dense_0/kernel holds"),
    ("scale", lambda a: a + 1j, "scale must be a float array, got complex"),
    ("hidden", lambda a: np.asarray(["8"]), "hidden must be an integer array"),
    ("center", lambda a: a[:2], "center must have shape (3,)"),
])
def test_a_poisoned_seednet_is_refused(seednet, tmp_path, key, change, message):
    with np.load(seednet) as z:
        arrays = dict(z)
    arrays[key] = change(arrays[key])
    np.savez(tmp_path / "net.npz", **arrays)
    with pytest.raises(InputError, match="net.npz") as err:
        learned.load(tmp_path / "net.npz")
    assert message in str(err.value) and len(str(err.value).splitlines()) == 1


def test_a_saved_seednet_loads(seednet):
    net = learned.load(seednet)
    assert net.hidden == (8,) and net.heads == 2
