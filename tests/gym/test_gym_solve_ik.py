"""``so101_mjx.gym.solve_ik``: the reference's IK dispatcher (seed 000, ``ik_control.solve_ik``)
against lerobot_env_so101 0.4.0's own, on its pick scene."""

import inspect

import mujoco
import numpy as np
import pytest

from so101_mjx.gym import solve_ik

ik_control = pytest.importorskip("lerobot_env_so101.ik_control")
mujoco_env = pytest.importorskip("lerobot_env_so101.mujoco_env")


@pytest.fixture(scope="module")
def scene():
    model = mujoco.MjModel.from_xml_path(str(mujoco_env.ASSETS_DIR / "pick_scene.xml"))
    data = mujoco.MjData(model)
    dofs = np.asarray([model.joint(n).id
                       for n in ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll")])
    data.qpos[dofs] = [0.1, -0.2, 0.3, 0.2, 0.1]
    data.qpos[model.joint("gripper").qposadr[0]] = 0.4
    mujoco.mj_forward(model, data)
    return model, data, model.site("gripperframe").id, dofs


def test_signature_and_defaults_are_the_references():
    """Seed 000, solve_ik(model, data, site_id, dof_ids, target_pos, ik_method=..., ...): same parameters and
    defaults."""
    ours, theirs = inspect.signature(solve_ik).parameters, inspect.signature(ik_control.solve_ik).parameters
    assert list(ours) == list(theirs)
    for name, p in theirs.items():
        np.testing.assert_array_equal(ours[name].default, p.default, err_msg=name)


@pytest.mark.parametrize("kwargs", [
    dict(),
    dict(ik_method="pseudoinverse"),
    dict(ik_damping=0.05, ik_iterations=8, seed_q=np.array([0.0, 0.3, -0.2, 0.5, 0.0])),
    dict(point_offset=np.array([0.0, 0.0, 0.02]), approach_axis=0),
])
def test_matches_the_reference_and_restores_data(scene, kwargs):
    """Seed 000, solve_ik: both methods, seeds and the top-down options give the reference's joints; data is
    restored."""
    model, data, site, dofs = scene
    target = np.array([0.28, 0.05, 0.12])
    before = data.qpos.copy()
    q = solve_ik(model, data, site, dofs, target, **kwargs)
    np.testing.assert_array_equal(data.qpos, before)
    expected = ik_control.solve_ik(model, data, site, dofs, target, **kwargs)
    assert q.shape == (5,) and q.dtype == np.float64
    np.testing.assert_allclose(q, expected, rtol=0, atol=1e-9)
    assert np.abs(q - before[dofs]).max() > 1e-3  # it moved


def test_refuses_an_unknown_method_and_pseudoinverse_options(scene):
    """Seed 000, solve_ik Raises: ValueError for an unknown ik_method, or an offset / approach axis with the
    pseudoinverse."""
    model, data, site, dofs = scene
    with pytest.raises(ValueError, match="Unknown IK method: 'newton'"):
        solve_ik(model, data, site, dofs, np.zeros(3), ik_method="newton")
    for kwargs in (dict(point_offset=np.zeros(3)), dict(approach_axis=0)):
        with pytest.raises(ValueError, match="require ik_method='levenberg_marquardt'"):
            solve_ik(model, data, site, dofs, np.zeros(3), ik_method="pseudoinverse", **kwargs)
    with pytest.raises(ValueError, match=r"target_pos must have shape \(3,\)"):
        solve_ik(model, data, site, dofs, np.zeros(2))
