"""Options several ``so101-mjx`` commands share: the physics backend, the render quality, the joint units,
and the camera-file and visual-randomization options of ``distill`` and ``record``.

Values that come from the library's own tables (backends, render qualities, joint units) are checked
when parsed, by :func:`~so101_mjx.cli.argtypes.one_of`, which imports the table then.
"""

from __future__ import annotations

import argparse

from so101_mjx.cli import argtypes as types

BACKEND = types.one_of("so101_mjx.sim.physics", "BACKENDS", "backend")
QUALITY = types.one_of("so101_mjx.render.frames", "QUALITIES", "image quality")
JOINT_UNITS = types.one_of("so101_mjx.robot.motors", "JOINT_UNITS", "joint units")
BACKEND_HELP = "physics backend: mjx or c (default: c on CPU, mjx on accelerators)"
QUALITY_HELP = "camera render model: fast, shadowed or full"


def add_camera_spec(parser: argparse.ArgumentParser) -> None:
    """``--camera-spec CAMERA=FILE``, repeatable: an image camera's file."""
    parser.add_argument("--camera-spec", dest="camera_specs", type=types.camera_spec, action="append", default=None,
                        metavar="CAMERA=FILE",
                        help="a camera's file (OpenCV conventions: pose, intrinsics, lens distortion, "
                        "latency in ticks; docs/pixels.md) or a shipped one (menagerie_wrist); repeat per camera")


def add_visual_randomization(parser: argparse.ArgumentParser, what: str) -> None:
    """``--visual-randomization``: a level or a JSON object, per episode of ``what``."""
    parser.add_argument("--visual-randomization", type=types.visual_randomization, default=None,
                        metavar="standard|wide|cluttered|JSON",
                        help="randomize lighting, colours, camera pose and lens, image effects and (cluttered) "
                             f"textures, a backdrop and distractors per episode of {what}: 'standard', 'wide', "
                             "'cluttered' or a JSON "
                             "object of so101_mjx.render.visual_randomization.VisualRandomization's fields")
