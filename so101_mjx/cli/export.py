"""``so101-mjx export CHECKPOINT``: a checkpoint to ONNX and numpy (:func:`so101_mjx.training.export.export`),
or a distill directory's pixel student to ONNX (:func:`so101_mjx.training.pixel_policy.export`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from so101_mjx.cli import argtypes as types


def arguments(parser: argparse.ArgumentParser) -> None:
    """The command's arguments."""
    parser.add_argument("checkpoint", help="run directory, its checkpoints/ directory, or one step directory; "
                        "or a distill directory (its pixel student -> student.onnx)")
    parser.add_argument("--out", type=types.output_file, default=None,
                        help="ONNX path (default: <run dir>/policy.onnx, "
                        "<distill dir>/student.onnx); a state policy's .npz goes beside it")


def run(args: argparse.Namespace) -> int:
    from so101_mjx.training import checkpoint, export, pixel_policy

    if (Path(args.checkpoint) / pixel_policy.META_FILE).is_file():
        pixel_policy.export(args.checkpoint, args.out)
        return 0
    step_dir = checkpoint.resolve(args.checkpoint)
    export.export(step_dir, args.out or step_dir.parent.parent / "policy.onnx")
    return 0
