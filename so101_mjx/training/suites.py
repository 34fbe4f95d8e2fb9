"""``so101-mjx evaluate POLICY --suite NAME``: a policy over a suite of conditions a real arm presents.

A condition is a named change of the policy's own env config (:data:`CONDITIONS`): the servo model at
its nominal values and at the edges of PickCube's training ranges, one and two extra ticks of latency,
the block's friction and mass at the edges of a typical randomization, (joint-mode policies) a
calibration off by ±2° on every motor, and (pixel students) the frames without visual randomization,
under the ``standard`` and ``wide`` levels, and one more tick of frame latency on every camera. A suite is
data: a list of conditions and an episode count (:data:`SUITES`, or a JSON file ``{"episodes": N,
"conditions": [NAME | {"name", "env_config"}, ...]}``).

Every cell runs the same seeded episodes (episode ``i`` starts from the same key in every cell and for
every policy), so two policies' outcomes pair up episode by episode: ``--compare`` reports per-cell
differences with McNemar's exact test (:mod:`so101_mjx.validation.stats`). The nominal cell is exactly
``so101-mjx eval`` on the same seed and episodes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from so101_mjx import _precision
from so101_mjx.errors import InputError
from so101_mjx.validation.stats import mcnemar, verdict, wilson

DEGREES_OFF = 2.0  # the calibration conditions' offset per motor, degrees
COUNTS_PER_DEGREE = 4096 / 360.0
# PickCube's servo ranges (training.presets.pick_cube.SERVO_RANGES) at their slow and fast ends
SERVO_EDGES = {
    "servo-slow": {"delay_ticks": 1, "backlash": 0.035, "max_velocity": 3.0, "deadband": 0.0035},
    "servo-fast": {"delay_ticks": 0, "backlash": 0.01, "max_velocity": 6.0, "deadband": 0.0},
}


def _overrides(fields: dict[str, Any]) -> Callable[[dict[str, Any]], dict[str, Any] | None]:
    """A user-defined condition: these env config fields, whatever the policy's config."""
    return lambda config: dict(fields)


def _servo(values: dict[str, Any]) -> Callable[[dict[str, Any]], dict[str, Any] | None]:
    return lambda config: {"servo_model": values}


def _latency(extra: int) -> Callable[[dict[str, Any]], dict[str, Any] | None]:
    """``extra`` more control ticks between a target and the servos: added to the policy's own servo model
    (its delay, or its drawn delays' range), or a servo model of pure delay when it has none."""

    def change(config: dict[str, Any]) -> dict[str, Any]:
        own = config.get("servo_model")
        if own is None:
            return {"servo_model": {"delay_ticks": extra, "backlash": 0.0, "max_velocity": None, "quantize": False}}
        own = dict(own)
        ranges = own.get("ranges")
        if ranges and ranges.get("delay_ticks") is not None:
            low, high = ranges["delay_ticks"]
            own["ranges"] = {**ranges, "delay_ticks": (low + extra, high + extra)}
        else:
            delay = own.get("delay_ticks", 0)
            own["delay_ticks"] = tuple(d + extra for d in delay) if isinstance(delay, (list, tuple)) else delay + extra
        return {"servo_model": own}

    return change


def _scaled(field: str, factor: float) -> Callable[[dict[str, Any]], dict[str, Any] | None]:
    return lambda config: {"randomization": {**(config.get("randomization") or {}), field: (factor, factor)}}


def _calibration_off(degrees: float) -> Callable[[dict[str, Any]], dict[str, Any] | None]:
    """A follower whose calibration reads every motor ``degrees`` off the nominal one (joint mode only)."""

    def change(config: dict[str, Any]) -> dict[str, Any] | None:
        if config.get("control_mode", "cartesian") != "joint":
            return None  # a Cartesian policy reads joint angles in radians: no motor units to be off
        from so101_mjx.robot import calibration, motors, scenes

        nominal = calibration.Calibration.nominal(motors.joint_ranges(scenes.load_model()))
        zero = tuple(z + degrees * COUNTS_PER_DEGREE for z in nominal.zero_counts)
        return {"calibration": dataclasses.asdict(
            dataclasses.replace(nominal, zero_counts=zero, source=f"{degrees:+g} deg"))}

    return change


def _visual(level: str | None) -> Callable[[dict[str, Any]], dict[str, Any] | None]:
    """A pixel student's frames under visual randomization ``level`` (None: none)."""

    def change(config: dict[str, Any]) -> dict[str, Any] | None:
        if not config.get("image_obs"):
            return None  # a state policy renders no frames
        from so101_mjx.render import visual_randomization as vr

        return {"visual_randomization": None if level is None else dataclasses.asdict(vr.LEVELS[level])}

    return change


def _frame_latency(extra: int) -> Callable[[dict[str, Any]], dict[str, Any] | None]:
    """A pixel student's every camera ``extra`` control ticks later than its own camera files say (a camera without
    one: the scene camera's own field of view, ``extra`` ticks late)."""

    def change(config: dict[str, Any]) -> dict[str, Any] | None:
        if not config.get("image_obs"):
            return None
        from so101_mjx.robot import scenes

        model = scenes.load_model()
        own = dict(config.get("camera_specs") or ())
        specs = {}
        for camera in config.get("image_cameras") or ("front",):
            spec = dict(own.get(camera) or {"fovy": float(model.cam(camera).fovy[0])})
            specs[camera] = {**spec, "latency": int(spec.get("latency") or 0) + extra}
        return {"camera_specs": specs}

    return change


# condition name -> its change of the policy's env config (None: it does not apply to this policy)
CONDITIONS: dict[str, Callable[[dict[str, Any]], dict[str, Any] | None]] = {
    "nominal": lambda config: {},
    "servo": _servo({}),
    **{name: _servo(values) for name, values in SERVO_EDGES.items()},
    "latency+1": _latency(1),
    "latency+2": _latency(2),
    "friction-0.5x": _scaled("block_friction", 0.5),
    "friction-1.5x": _scaled("block_friction", 1.5),
    "mass-0.5x": _scaled("block_mass", 0.5),
    "mass-2x": _scaled("block_mass", 2.0),
    "calibration-2deg": _calibration_off(-DEGREES_OFF),
    "calibration+2deg": _calibration_off(DEGREES_OFF),
    "visual-off": _visual(None),
    "visual-standard": _visual("standard"),
    "visual-wide": _visual("wide"),
    "visual-cluttered": _visual("cluttered"),
    "frame-latency+1": _frame_latency(1),
}
SUITES: dict[str, dict[str, Any]] = {
    "smoke": {"episodes": 16, "conditions": ["nominal", "servo", "latency+1"]},
    "standard": {"episodes": 128, "conditions": list(CONDITIONS)},
}


def table_row(condition: str, outcome: dict[str, Any]) -> dict[str, Any]:
    """A table row of one condition's :func:`~so101_mjx.training.evaluate.summary`: success k/N with its
    Wilson interval, the mean length, episodes/s (compile included) and the per-episode successes."""
    k, n = sum(outcome["success"]), len(outcome["success"])
    return {"condition": condition, "successes": k, "episodes": n, "rate": k / n, "wilson95": list(wilson(k, n)),
            "mean_length": outcome["mean_length"], "episodes_per_s": n / outcome["seconds"],
            "success": [bool(s) for s in outcome["success"]]}


def suite(spec: str | dict[str, Any], source: str = "suite") -> tuple[int, list[tuple[str, Any]]]:
    """``(episodes, [(condition name, its change)])`` of a named suite or a suite's dict (a parsed file);
    InputError naming ``source`` for an unknown condition or a malformed suite."""
    if isinstance(spec, str):
        if spec not in SUITES:
            raise InputError(f"{source}: unknown suite {spec!r}; expected one of {sorted(SUITES)} or a JSON file")
        spec = SUITES[spec]
    if (not isinstance(spec, dict) or set(spec) - {"episodes", "conditions"}
            or not isinstance(spec.get("conditions"), list)):
        raise InputError(f"{source}: a suite is {{\"episodes\": N, \"conditions\": [...]}}, got {spec!r}")
    episodes = spec.get("episodes", 128)
    if not isinstance(episodes, int) or isinstance(episodes, bool) or episodes < 1:
        raise InputError(f"{source}: episodes must be an integer >= 1, got {episodes!r}")
    cells = []
    for entry in spec["conditions"]:
        if isinstance(entry, str):
            if entry not in CONDITIONS:
                raise InputError(f"{source}: unknown condition {entry!r}; expected one of {list(CONDITIONS)} "
                                 "or {\"name\": ..., \"env_config\": {...}}")
            cells.append((entry, CONDITIONS[entry]))
        elif isinstance(entry, dict) and set(entry) == {"name", "env_config"} and isinstance(entry["env_config"], dict):
            cells.append((str(entry["name"]), _overrides(entry["env_config"])))
        else:
            raise InputError(f"{source}: a condition is a name or {{\"name\": ..., \"env_config\": {{...}}}}, "
                             f"got {entry!r}")
    return episodes, cells


def run_suite(path: str | Path, spec: str | dict[str, Any], seed: int = 0, backend: str = "c",
              episodes: int | None = None, progress: Callable[[str], None] = print,
              env: str | None = None) -> dict[str, Any]:
    """Run the policy at ``path`` (a state policy, a pixel student on its frames, or a lerobot policy) over the
    suite ``spec`` on ``backend`` (float32, as ``eval``), in its own env or (a lerobot policy) the task ``env``;
    returns ``{"policy", "env", "seed", "backend", "episodes", "cells":
    [table_row()], "skipped"}``."""
    from so101_mjx.training import evaluate, policies

    count, cells = suite(spec)
    count = episodes or count
    rows, skipped = [], []
    with _precision.x64(False):  # float32, as eval
        policy = policies.load(path)
        name, base = policy.env_for(env)
        if not policy.pixel:
            base = policies.without_cameras(base)  # it reads the flat observation: no frames rendered
        for i, (condition, change) in enumerate(cells):
            overrides = change(base)
            if overrides is None:
                skipped.append(condition)
                continue
            outcome = evaluate.run_policy(policy, name, {**base, **overrides}, backend, count, seed)
            rows.append(table_row(condition, outcome))
            progress(f"[{i + 1}/{len(cells)}] {condition}: {rows[-1]['successes']}/{count} "
                     f"({outcome['seconds']:.0f} s)")
    return {"policy": str(path), "env": name, "seed": seed, "backend": backend, "episodes": count,
            "cells": rows, "skipped": skipped}


def compare(first: dict[str, Any], second: dict[str, Any]) -> list[dict[str, Any]]:
    """Per condition both results hold: the success difference (second - first) and McNemar's test."""
    theirs = {row["condition"]: row for row in second["cells"]}
    out = []
    for row in first["cells"]:
        other = theirs.get(row["condition"])
        if other is not None:
            test = mcnemar(row["success"], other["success"])
            out.append({"condition": row["condition"], **test, "verdict": verdict(test)})
    return out


def markdown(result: dict[str, Any], comparison: list[dict[str, Any]] | None = None) -> str:
    """The result as a Markdown table (and the comparison's, when given)."""
    from so101_mjx.training.policies import label

    lines = [f"`{label(result['policy'])}` on {result['env']}, {result['episodes']} episodes per condition, "
             f"seed {result['seed']}, backend {result['backend']}", "",
             "| condition | success | 95 % interval (Wilson) | mean length | episodes/s |", "|---|---|---|---|---|"]
    for row in result["cells"]:
        low, high = row["wilson95"]
        lines.append(f"| {row['condition']} | {row['successes']}/{row['episodes']} ({row['rate']:.3f}) | "
                     f"{low:.3f}–{high:.3f} | {row['mean_length']:.1f} | {row['episodes_per_s']:.1f} |")
    if result["skipped"]:
        lines += ["", f"Not applicable to this policy: {', '.join(result['skipped'])}."]
    if comparison:
        lines += ["", "| condition | difference (second − first) | only first | only second | McNemar p | verdict |",
                  "|---|---|---|---|---|---|"]
        lines += [f"| {c['condition']} | {c['difference']:+.3f} | {c['only_first']} | {c['only_second']} | "
                  f"{c['p_value']:.3g} | {c['verdict']} |" for c in comparison]
    return "\n".join(lines) + "\n"


def plot(result: dict[str, Any], path: str | Path) -> None:
    """Success per condition with its Wilson interval, as a PNG (matplotlib: the ``[viz]`` extra)."""
    import matplotlib

    from so101_mjx.training.policies import label

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["cells"]
    rates = np.array([r["rate"] for r in rows])
    low, high = np.array([r["wilson95"] for r in rows]).T
    fig, ax = plt.subplots(figsize=(max(4.0, 0.6 * len(rows) + 1.5), 3.2))
    ax.bar(range(len(rows)), rates, yerr=[rates - low, high - rates], capsize=3, color="#4c72b0")
    ax.set_xticks(range(len(rows)), [r["condition"] for r in rows], rotation=40, ha="right")
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("success (95 % Wilson)")
    ax.set_title(f"{label(result['policy'])} on {result['env']}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
