"""``so101-mjx distill TEACHER``: a state policy distilled into a pixel policy with DAgger
(:func:`so101_mjx.training.distill.train_student`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from so101_mjx.cli import argtypes as types
from so101_mjx.cli.options import QUALITY, QUALITY_HELP, add_camera_spec, add_visual_randomization

# Frame sizes (px): the pixel student's convolutions need 36 (so101_mjx.training.pixel_policy.MIN_IMAGE_SIZE), the env
# renders up to 1024 (so101_mjx.envs.config.MAX_IMAGE_SIZE).
IMAGE_SIZES = (36, 1024)
# DistillConfig's fields (so101_mjx.training.distill), each an option; None keeps the dataclass default.
CONFIG_FIELDS: dict[str, Callable[[str], Any]] = {
    "iterations": types.positive_int, "episodes": types.positive_int, "steps": types.steps, "updates": types.steps,
    "batch_size": types.positive_int, "learning_rate": types.positive_float, "seed": types.seed,
    "shift": types.int_in(0, 16, "shift"), "colour_jitter": types.non_negative_float,
    "state_loss": types.non_negative_float, "student": str,
    "estimate_origin": str}
# so101_mjx.training.distill.STUDENTS and estimator.ORIGINS (not imported: the CLI loads lazily)
CHOICES = {"student": ("direct", "estimator"), "estimate_origin": ("world", "gripper")}


def arguments(parser: argparse.ArgumentParser) -> None:
    """The command's arguments."""
    parser.add_argument("teacher", help="the state policy: a checkpoint or an exported .onnx / .npz")
    parser.add_argument("--out", type=types.output_dir, required=True,
                        help="directory for student.npz and distill.json")
    add_camera_spec(parser)
    parser.add_argument("--image-size", type=types.int_in(*IMAGE_SIZES, "image size"), default=64,
                        help="frame height and width, pixels: {0} to {1} (the student's "
                             "convolutions need {0})".format(*IMAGE_SIZES))
    parser.add_argument("--image-quality", type=QUALITY, default="shadowed",
                        help=f"{QUALITY_HELP} of the training frames (shadowed: what the gym envs' full "
                             "renders look like)")
    parser.add_argument("--cameras", type=types.camera_names, default=("front",), metavar="NAMES",
                        help="comma-separated image cameras the student sees (front, wrist), one conv tower each")
    add_visual_randomization(parser, "the training frames")
    parser.add_argument("--servo-model", type=types.servo_model_or_off, default=None, metavar="JSON",
                        help="distil under this servo model instead of the teacher's (so101_mjx.sim.servo.ServoModel's "
                             "fields as a JSON object, {} for the defaults, or a .json file), or without one: off")
    for name, kind in CONFIG_FIELDS.items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=kind, default=None, help="default: DistillConfig's",
                            choices=CHOICES.get(name))


def run(args: argparse.Namespace) -> int:
    from so101_mjx.training import distill

    config = distill.DistillConfig(**{name: getattr(args, name) for name in CONFIG_FIELDS
                                      if getattr(args, name) is not None})
    distill.train_student(args.teacher, args.out, config, image_size=args.image_size, image_quality=args.image_quality,
                          cameras=args.cameras, visual_randomization=args.visual_randomization,
                          camera_specs=dict(args.camera_specs or ()), servo_model=args.servo_model)
    return 0
