"""The user's cameras on MuJoCo Warp's renderer (so101_mjx.render.warp): intrinsics, pose and lens distortion.

Skipped where mujoco_warp is not installed (``pip install -e ".[warp]"``, Python >= 3.12); runs on
Warp's CPU device where no GPU is present.
"""

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

pytest.importorskip("mujoco_warp")
pytest.importorskip("cv2")

from so101_mjx.render.camera import load_camera
from so101_mjx.render.warp import WarpBatchRenderer
from tests.render.test_camera import GOOD, MOUNT_QUAT, SCENE, _centroids, _projected, _rotation, _write


def test_warp_renders_a_distorted_file_camera_where_projection_predicts(tmp_path):
    """Off-centre, non-square, on a tilted body, barrel lens, 320x240 from a 640x480 calibration: Warp's
    frames (jit + vmap over 2 worlds) put each sphere within 0.5 px of OpenCV's projection."""
    quat = np.zeros(4)
    mujoco.mju_mat2Quat(quat, (_rotation(MOUNT_QUAT).T @ np.diag([1.0, -1.0, -1.0])).reshape(-1))
    spec = load_camera(_write(tmp_path, {**GOOD, "orientation": quat.tolist()}))
    renderer = WarpBatchRenderer(mujoco.MjModel.from_xml_string(SCENE), 240, 320, "cam", spec=spec)
    frames = np.asarray(jax.jit(jax.vmap(renderer.jax_render))(jnp.zeros((2, 1))))
    assert frames.shape == (2, 240, 320, 3) and frames[0].tobytes() == frames[1].tobytes()
    found, expected = _centroids(frames[0]), _projected(spec, 320, 240)
    assert len(found) == len(expected)
    error = np.linalg.norm(found[:, None] - expected[None], axis=-1).min(axis=1)
    assert error.max() < 0.5, error
