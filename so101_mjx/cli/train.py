"""``so101-mjx train``: PPO or SAC training on a registered env (:func:`so101_mjx.training.ppo.train`), optionally in
several processes, then the export and its replay.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
import warnings
from pathlib import Path
from typing import Any

from so101_mjx.cli import argtypes as types
from so101_mjx.cli.options import BACKEND, BACKEND_HELP
from so101_mjx.errors import InputError


def arguments(parser: argparse.ArgumentParser) -> None:
    """The command's arguments."""
    parser.add_argument("--env", default="SO101Reach-v0", help="registered env name")
    parser.add_argument("--preset", default=None,
                        help="a preset of the env (so101_mjx/training/presets/<task>.py; every "
                        "task has 'tiny' and 'tiny-sac'; default: the task's DEFAULT, or its 'sac' preset "
                        "with --algo sac)")
    parser.add_argument("--env-config", type=types.name_or_json, default=None, metavar="NAME|JSON",
                        help="an env variant laid over the preset: one of the task's named variants (e.g. PickCube's "
                        "'joint', 'joint-30hz', 'servo'; docs/training.md), or env config fields as JSON, "
                        "inline or a file")
    parser.add_argument("--algo", choices=("ppo", "sac"), default=None,
                        help="the algorithm (default: the preset's); a preset of the other algorithm is refused")
    parser.add_argument("--backend", type=BACKEND, default=None, help=BACKEND_HELP)
    parser.add_argument("--seed", type=types.seed, default=0)
    parser.add_argument("--out", type=types.output_dir, default=None,
                        help="run directory (default: runs/<env>-<preset>[-<variant>]-s<seed>)")
    parser.add_argument("--resume", action="store_true", help="continue from the latest checkpoint in --out")
    parser.add_argument("--num-timesteps", type=types.positive_int, default=None,
                        help="override the preset's env steps (SAC: also its replay buffer's size unless the "
                             "preset sets max_replay_size; a --resume may raise it)")
    parser.add_argument("--num-evals", type=types.positive_int, default=None,
                        help="override the preset's number of evals (>= 2; one checkpoint each after the first)")
    parser.add_argument("--demo-start-prob", type=types.probability, default=None,
                        help="override the preset's share of training resets from scripted states (0 = none; evals "
                             "always reset normally)")
    parser.add_argument("--observation-noise", type=types.json_object, default=None, metavar="JSON",
                        help="train on observations off by a per-episode bias and per-step noise: "
                        "'{\"block_pos\": [BIAS_SIGMA, STEP_SIGMA]}' (m; evals during training observe it too, "
                        "export and eval do not; so101_mjx.training.observation_noise)")
    parser.add_argument("--export", action="store_true", help="export policy.onnx and policy.npz into the run dir")
    parser.add_argument("--replay-episodes", type=types.non_negative_int, default=0,
                        help="replay N episodes of the export on CPU MuJoCo")
    parser.add_argument("--num-processes", type=types.positive_int, default=1,
                        help="train in N processes joined by jax.distributed; alone: N processes on this "
                        "host, one device each on a CPU (with --process-id and --coordinator: this process is one of "
                        "N, e.g. one per host)")
    parser.add_argument("--process-id", type=types.non_negative_int, default=None,
                        help="this process's index in a multi-process run")
    parser.add_argument("--coordinator", default=None, metavar="HOST:PORT",
                        help="process 0's address in a multi-process run")


def spelling(renamed: Any) -> str:
    """A former preset's run (:class:`~so101_mjx.training.preset.Renamed`) as options: ``--preset P --env-config V``
    and its length fields."""
    flags = "".join(f" --{k.replace('_', '-')} {v}" for k, v in renamed.length.items())
    return f"--preset {renamed.preset} --env-config {renamed.variant}{flags}"


def check_processes(num_processes: int, process_id: int | None, coordinator: str | None) -> None:
    """InputError unless the options name one launcher (no process id, no coordinator) or one
    process of a run (``process_id`` in ``[0, num_processes)`` and a ``host:port`` coordinator)."""
    if process_id is None and coordinator is None:
        return
    if process_id is None or coordinator is None:
        raise InputError("--process-id and --coordinator go together (one process of a multi-process run)")
    if not 0 <= process_id < num_processes:
        raise InputError(f"--process-id must be in [0, --num-processes={num_processes}), got {process_id}")
    host, _, port = coordinator.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise InputError(f"--coordinator must be HOST:PORT (e.g. 10.0.0.1:23456), got {coordinator!r}")


def run(args: argparse.Namespace) -> int:
    from so101_mjx._files import check_out
    from so101_mjx.envs.registry import canonical
    from so101_mjx.training import distributed, export, ppo, presets, replay
    from so101_mjx.training.finite import NonFiniteError

    check_processes(args.num_processes, args.process_id, args.coordinator)
    env_name = canonical(args.env)
    renamed = presets.RENAMED.get(env_name, {}).get(args.preset or "")
    if renamed is not None and args.env_config is not None:
        raise InputError(f"preset {args.preset!r} is now {spelling(renamed)}: "
                         "give the preset and --env-config that way")
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always", FutureWarning)
        preset_name, preset, variant = presets.resolve(env_name, args.preset, args.algo, args.env_config)
    for warning in said:
        renamed_to = isinstance(warning.message, presets.RenamedPreset) and spelling(warning.message.renamed)
        note = f"preset {args.preset!r} of {env_name} is now {renamed_to}" if renamed_to else warning.message
        print(f"so101-mjx train: note: {note}", file=sys.stderr)
    if preset.algo == "sac" and args.num_processes > 1:
        raise InputError(f"--num-processes {args.num_processes}: SAC (preset {preset_name!r}) trains in one process")
    if args.num_processes > 1 and args.process_id is None:
        return distributed.launch(args._argv, args.num_processes)
    if args.process_id is not None:
        distributed.initialize(args.coordinator, args.num_processes, args.process_id)
    overrides = {"num_timesteps": args.num_timesteps, "num_evals": args.num_evals,
                 "demo_start_prob": args.demo_start_prob, "observation_noise": args.observation_noise}
    preset = dataclasses.replace(preset, **{k: v for k, v in overrides.items() if v is not None})
    label = "-".join(filter(None, (env_name, preset_name, presets.variant_label(variant))))
    out = Path(types.output_dir(args.out or f"runs/{label}-s{args.seed}"))
    if args.export or args.replay_episodes:  # refused before training, not after
        check_out(out / "policy.onnx", out / "policy.npz", parameter="--export")
    start = time.perf_counter()
    try:
        last, metrics = ppo.train(env_name, preset_name, preset, out, backend=args.backend, seed=args.seed,
                                  resume=args.resume, variant=variant)
    except NonFiniteError as err:  # a diverged run: one line, exit 1 (not a traceback, not a published NaN checkpoint)
        print(f"so101-mjx train: error: {err}", file=sys.stderr)
        return 1
    if args.process_id:  # a multi-process run's other processes: process 0 reports, exports and replays
        return 0
    print(f"checkpoint: {last}  ({time.perf_counter() - start:.0f} s)  final JAX eval: success "
          f"{metrics.get('eval/episode_final_success', float('nan')):.3f} over {preset.num_eval_envs} episodes")
    if args.export or args.replay_episodes:
        onnx_path, npz_path = export.export(last, out / "policy.onnx")
        if args.replay_episodes:
            replay.replay(onnx_path or npz_path, episodes=args.replay_episodes, seed=args.seed)
    print(f"total wall time {time.perf_counter() - start:.0f} s")
    return 0
