"""``so101-mjx bench <target>``: each target's run over its benchmark, ``so101_mjx.benchmarks.<target>.bench``
(the targets' arguments: :mod:`so101_mjx.cli.benches`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable


def fk(args: argparse.Namespace) -> None:
    """``bench fk``: :func:`so101_mjx.benchmarks.fk.bench`."""
    from so101_mjx.benchmarks import fk as benchmark

    benchmark.bench(args.batch, args.repeats, x64=args.x64)


def ik(args: argparse.Namespace) -> None:
    """``bench ik``: :func:`so101_mjx.benchmarks.ik.bench`."""
    from so101_mjx.benchmarks import ik as benchmark

    benchmark.bench(args.batch, args.repeats, args.reference_targets, args.learned_steps, x64=args.x64,
                    learned=args.learned, save_learned=args.save_learned)


def env(args: argparse.Namespace) -> None:
    """``bench env``: :func:`so101_mjx.benchmarks.env.bench`."""
    from so101_mjx.benchmarks import env as benchmark

    benchmark.bench(args.env, args.batch, args.steps, args.repeats, backend=args.backend, loop=args.loop,
                    ik_solver=args.ik_solver, reference_env=not args.no_reference,
                    cost_batch=args.cost_batch if args.cost else None)


def dynamics(args: argparse.Namespace) -> None:
    """``bench dynamics``: :func:`so101_mjx.benchmarks.dynamics.bench`."""
    from so101_mjx.benchmarks import dynamics as benchmark

    benchmark.bench(args.batch, args.repeats, args.samples, x64=args.x64)


def render(args: argparse.Namespace) -> None:
    """``bench render``: :func:`so101_mjx.benchmarks.render.bench`."""
    from so101_mjx.benchmarks import render as benchmark

    benchmark.bench(args.size, args.batch, args.quality, args.env_batch, args.repeats)


def train(args: argparse.Namespace) -> None:
    """``bench train``: :func:`so101_mjx.benchmarks.train.bench`."""
    from so101_mjx.benchmarks import train as benchmark

    benchmark.bench(args.env, args.preset, args.backend, args.epochs, args.updates_per_epoch, args.repeats)


def timestep(args: argparse.Namespace) -> None:
    """``bench timestep``: :func:`so101_mjx.benchmarks.timestep.bench`."""
    from so101_mjx.benchmarks import timestep as benchmark

    benchmark.bench(args.env, args.physics_dt, args.episodes, args.seed)


def vector(args: argparse.Namespace) -> None:
    """``bench vector``: :func:`so101_mjx.benchmarks.vector.bench`."""
    from so101_mjx.benchmarks import vector as benchmark

    benchmark.bench(args.env, args.batch, args.steps, args.repeats, args.image_size, args.image_cameras,
                    args.image_quality)


def device(args: argparse.Namespace) -> None:
    """``bench device``: :func:`so101_mjx.benchmarks.device.bench`."""
    from so101_mjx.benchmarks import device as benchmark

    benchmark.bench(args.out, args.budget_s, smoke=args.smoke, backend=args.backend, worlds=args.worlds,
                    pixel_worlds=args.pixel_worlds, steps=args.steps)


RUNS: dict[str, Callable[[argparse.Namespace], None]] = {
    "fk": fk, "ik": ik, "env": env, "dynamics": dynamics, "render": render, "train": train, "timestep": timestep,
    "vector": vector, "device": device,
}


def run(args: argparse.Namespace) -> int:
    """Run the target ``args.target``."""
    RUNS[args.target](args)
    return 0
