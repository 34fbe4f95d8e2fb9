"""The SO-101 URDF written from the MJCF (seed 002, SolverCfg.urdf_path: a URDF loaded through MuJoCo's
URDF import): the shipped file is the converter's output, and its frames, axes, limits and inertias
round-trip: FK from the URDF equals FK from the MJCF to 1e-12 (float64)."""

import numpy as np
import pytest

from so101_mjx.errors import InputError, MissingFileError
from so101_mjx.ik import PytorchSolverCfg
from so101_mjx.robot import rotations as R, urdf
from so101_mjx.robot.scenes import load_model


def test_shipped_urdf_is_the_converters_output():
    """scenes/so101.urdf is mjcf_to_urdf of the so101 scene, so it cannot drift from the MJCF."""
    assert urdf.so101_urdf_path().read_text() == urdf.mjcf_to_urdf(load_model("so101"))


def test_urdf_round_trip_fk_limits_inertias():
    """FK of every link and of the TCP from the URDF equals the MJCF's to 1e-12; limits, axes and inertias equal."""
    mjcf = PytorchSolverCfg().init_solver()
    tcp = np.eye(4)
    tcp[:3, 3] = [0.01, -0.02, 0.03]
    from_urdf = PytorchSolverCfg(urdf_path=str(urdf.so101_urdf_path()), tcp=tcp).init_solver()
    mjcf.set_tcp(tcp)
    q = np.random.default_rng(0).uniform(-np.pi, np.pi, (256, 5))
    assert from_urdf.get_fk(q).dtype == np.float64
    np.testing.assert_allclose(np.asarray(from_urdf.get_fk(q)), np.asarray(mjcf.get_fk(q)), rtol=0, atol=1e-12)
    links_urdf, links_mjcf = (np.stack([np.asarray(x) for x in s.get_all_fk(q)]) for s in (from_urdf, mjcf))
    assert links_urdf.shape == links_mjcf.shape == (7, 256, 4, 4)
    np.testing.assert_allclose(links_urdf, links_mjcf, rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.asarray(from_urdf.get_jacobian(q)), np.asarray(mjcf.get_jacobian(q)),
                               rtol=0, atol=1e-12)
    assert from_urdf.get_qpos_limits() == mjcf.get_qpos_limits()
    a, b = load_model("so101"), urdf.load_robot(urdf.so101_urdf_path())[0]
    for name in ("shoulder", "upper_arm", "lower_arm", "wrist", "gripper", "moving_jaw_so101_v1"):
        i, j = a.body(name).id, b.body(name).id
        assert a.body_mass[i] == b.body_mass[j]
        np.testing.assert_allclose(b.body_inertia[j], a.body_inertia[i], rtol=1e-12, atol=0)
        np.testing.assert_allclose(b.body_ipos[j], a.body_ipos[i], rtol=0, atol=1e-15)
    for name in ("shoulder_pan", "gripper"):
        np.testing.assert_array_equal(b.jnt_range[b.joint(name).id], a.jnt_range[a.joint(name).id])
        np.testing.assert_array_equal(b.jnt_axis[b.joint(name).id], a.jnt_axis[a.joint(name).id])


def test_rpy_at_gimbal_lock_and_bad_files(tmp_path):
    """The converter's roll-pitch-yaw rebuilds rotations to round-off at pitch ±π/2; bad files name the file."""
    for pitch in (np.pi / 2, -np.pi / 2, 0.3):
        c, s = np.cos(pitch), np.sin(pitch)
        rot = np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]]) @ np.array([[1, 0, 0], [0, np.cos(0.4), -np.sin(0.4)],
                                                                       [0, np.sin(0.4), np.cos(0.4)]])
        np.testing.assert_allclose(R.rpy_to_mat(*R.mat_to_rpy(rot)), rot, rtol=0, atol=1e-15)
    with pytest.raises(InputError, match="not a rotation"):
        R.mat_to_rpy(2 * np.eye(3))
    with pytest.raises(MissingFileError, match="urdf_path"):
        urdf.load_robot(tmp_path / "missing.urdf")
    bad = tmp_path / "bad.urdf"
    bad.write_text("<robot name='x'><link name='a'></robot>")
    with pytest.raises(InputError, match="bad.urdf"):
        urdf.load_robot(bad)
    with pytest.raises(InputError, match="end_link_name 'nowhere'"):
        urdf.load_robot(urdf.so101_urdf_path(), "nowhere")
