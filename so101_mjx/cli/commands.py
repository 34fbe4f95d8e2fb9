"""The ``so101-mjx`` commands: each one's help and its module ``so101_mjx.cli.<command>`` (``bench`` targets:
their arguments in :mod:`so101_mjx.cli.benches`, their runs in :mod:`so101_mjx.cli.bench`).

A command's module declares its arguments (``arguments(parser)``) and carries it out (``run(args) -> int``),
importing the library (and JAX, MuJoCo) only inside ``run``, so ``--help`` of any command starts in a fraction
of a second. Options several commands share are in :mod:`so101_mjx.cli.options`.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable

from so101_mjx.cli import (
    camera,
    deploy,
    distill,
    eval as eval_,
    evaluate,
    export,
    info,
    parity,
    record,
    replay,
    rollout,
    sysid,
    teleop,
    train,
)

Arguments = Callable[[argparse.ArgumentParser], None]


@dataclasses.dataclass(frozen=True)
class Command:
    """A subcommand: its one-line help, the module whose ``run(args)`` it calls, and its arguments."""

    help: str
    module: str
    arguments: Arguments


def _command(help_: str, module, arguments: Arguments | None = None) -> Command:
    """The :class:`Command` of a ``so101_mjx.cli`` module (its ``arguments`` unless others are given)."""
    return Command(help_, module.__name__, arguments or module.arguments)


CAMERA: dict[str, Command] = {
    "marker": _command("write the ArUco marker for the gripper as a printable SVG", camera, camera.marker_arguments),
    "calibrate": _command("estimate a fixed camera's pose (and intrinsics) from a recording with the marker on the "
                          "gripper", camera, camera.calibrate_arguments),
}


COMMANDS: dict[str, Command] = {
    "info": _command("versions, JAX devices, scenes and envs", info),
    "rollout": _command("jitted batched rollout: success rate and env-steps/s", rollout),
    "parity": _command("MJX vs MuJoCo C vs gymnasium vs reference deviations", parity),
    "train": _command("PPO or SAC training (Brax)", train),
    "export": _command("export a checkpoint to ONNX and numpy", export),
    "replay": _command("replay an exported policy on CPU MuJoCo", replay),
    "eval": _command("evaluate a checkpoint or exported policy in the jitted env on mjx and/or c", eval_),
    "evaluate": _command("a policy over a suite of conditions (servo, latency, friction, mass, calibration) with "
                         "95 %% intervals; --compare pairs two policies", evaluate),
    "distill": _command("distil a state policy into a pixel policy with DAgger (backend c camera)", distill),
    "record": _command("record demonstrations as a LeRobotDataset v3.0 (no torch, no lerobot)", record),
    "deploy": _command("run an exported policy on a follower (real through lerobot, or simulated)", deploy),
    "sysid": _command("fit the servo model's per-motor parameters to a recorded dataset", sysid),
    "teleop": _command("drive the simulated arm from the keyboard (joint or Cartesian mode)", teleop),
}
