"""``so101-mjx sysid DATASET``: the servo model fitted to a recording
(:func:`so101_mjx.sysid.command.fit_servo_model`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from so101_mjx.cli import argtypes as types
from so101_mjx.cli.options import BACKEND, BACKEND_HELP, JOINT_UNITS


def arguments(parser: argparse.ArgumentParser) -> None:
    """The command's arguments."""
    parser.add_argument("dataset",
                        help="a LeRobotDataset v3.0 of a follower in joint mode: action and observation.state "
                                        "with the six '<motor>.pos' (so101-mjx deploy excitation --dataset DIR "
                                        "records one)")
    parser.add_argument("--out", type=types.output_file, default="servo_model.json",
                        help="the fitted ServoModel fields (JSON); the report goes beside it as <out>.report.json")
    parser.add_argument("--units", type=JOINT_UNITS, default="degrees",
                        help="the arm motors' units in the dataset, degrees or range_m100_100 (lerobot's "
                             "use_degrees=True or False)")
    parser.add_argument("--calibration", type=types.calibration, default=None, metavar="FILE",
                        help="the recording follower's lerobot calibration file (~/.cache/huggingface/lerobot/"
                             "calibration/robots/so101_follower/<id>.json): read the dataset in that arm's units "
                             "(default: the scene's joint ranges stand for its calibration)")
    parser.add_argument("--task", default="SO101Reach-v0", help="the scene the commands are replayed in")
    parser.add_argument("--backend", type=BACKEND, default=None, help=BACKEND_HELP)
    parser.add_argument("--motors", nargs="+", default=None, metavar="MOTOR",
                        help="fit these motors only (default: all six; the others keep the defaults)")
    parser.add_argument("--population", type=types.positive_int, default=64, help="candidate worlds simulated at once")
    parser.add_argument("--elites", type=types.positive_int, default=8,
                        help="candidates each search iteration keeps, per motor")
    parser.add_argument("--iterations", type=types.positive_int, default=12, help="cross-entropy iterations")
    parser.add_argument("--sweeps", type=types.non_negative_int, default=3, help="coordinate sweeps after the search")
    parser.add_argument("--polish", type=types.non_negative_int, default=4,
                        help="search iterations around the swept fit")
    parser.add_argument("--plot", dest="plot_to", metavar="PLOT", type=types.output_file, default=None,
                        help="also draw measured and fitted positions to this PNG")
    parser.add_argument("--seed", type=types.seed, default=0)


def report_path(out: str) -> Path:
    """``<out>.report.json``, checked writable before the fit (InputError naming it, e.g. for a directory there)."""
    from so101_mjx.errors import InputError

    path = Path(out).with_suffix(".report.json")
    try:
        types.output_file(str(path))
    except InputError as err:
        raise InputError(f"--out {out}: the report beside it, {err}") from None
    return path


def run(args: argparse.Namespace) -> int:
    from so101_mjx.sysid import command

    report_path(args.out)
    command.fit_servo_model(args.dataset, args.out, units=args.units, calibration=args.calibration, task=args.task,
                            backend=args.backend, motors=args.motors, population=args.population, elites=args.elites,
                            iterations=args.iterations, sweeps=args.sweeps, polish=args.polish,
                            plot_to=args.plot_to, seed=args.seed)
    return 0
