"""Training progress: one console line per eval, ``metrics.csv``, TensorBoard, learning-curve PNG.

:class:`Recorder` is the training loop's ``progress_fn`` (:func:`so101_mjx.training.ppo_loop.train`). Steps are
absolute. A run resumed from the checkpoint at step ``s`` re-runs the eval at ``s``: the CSV is
rewritten to its rows before ``s`` (so a kill after an eval row leaves no duplicate) and TensorBoard
events from ``s`` on are purged; ``wall_s`` continues from the last kept row. ``steps_per_s`` is
Brax's training throughput (env steps per second of the training epochs, learning included, evals
excluded). ``wall_s`` and ``steps_per_s`` are the only columns that depend on the wall clock.
"""

from __future__ import annotations

import csv
import io
import math
import time
from pathlib import Path
from typing import Any

from so101_mjx._files import atomic_path, atomic_write
from so101_mjx.errors import InputError

COLUMNS = ("step", "wall_s", "steps_per_s", "eval_reward", "eval_success", "eval_episode_length")
WALL_CLOCK_COLUMNS = ("wall_s", "steps_per_s")  # the columns that differ between identical runs
EVAL_KEYS = {
    "eval_reward": "eval/episode_reward",
    "eval_success": "eval/episode_final_success",
    "eval_episode_length": "eval/avg_episode_length",
}
CSV_FILE, PNG_FILE, TB_DIR = "metrics.csv", "learning_curve.png", "tb"


def read_csv(path: Path) -> list[dict[str, float]]:
    """The rows of ``metrics.csv``: ``step`` an int, every other column a float (NaN when empty).
    ValueError naming the file, the line and the column unless the header is :data:`COLUMNS` and
    every row holds one number per column (a whole, non-negative ``step``)."""
    if not Path(path).is_file():
        return []
    try:
        with open(path, newline="") as f:
            lines = list(csv.reader(f))
    except (UnicodeDecodeError, csv.Error) as err:
        raise InputError(f"{path}: unreadable as CSV ({err})") from None
    if not lines or lines[0] != list(COLUMNS):
        raise InputError(f"{path}: the header must be the columns {list(COLUMNS)}, got "
                         f"{lines[0] if lines else 'an empty file'}")
    return [_row(path, number, values) for number, values in enumerate(lines[1:], 2)]


def _row(path: Path, number: int, values: list[str]) -> dict[str, float]:
    """Line ``number``'s ``values`` as a row (see :func:`read_csv`)."""
    if len(values) != len(COLUMNS):
        raise InputError(f"{path}: line {number} holds {len(values)} values, expected {len(COLUMNS)} "
                         f"({', '.join(COLUMNS)})")
    row = {column: _number(path, number, column, text) for column, text in zip(COLUMNS, values)}
    step = row["step"]
    if not (math.isfinite(step) and step >= 0 and step.is_integer()):
        raise InputError(f"{path}: line {number}, column 'step' holds {values[0]!r}; expected a whole number of "
                         "env steps >= 0")
    return {**row, "step": int(step)}


def _number(path: Path, number: int, column: str, text: str) -> float:
    try:
        return float(text) if text else math.nan
    except ValueError:
        raise InputError(f"{path}: line {number}, column {column!r} holds {text!r}; expected a "
                         "number (or empty)") from None


class Recorder:
    """Console + CSV + TensorBoard writer for ``progress_fn(step, metrics)``; ``step`` absolute.

    ``resume_step``: the step a resumed run restarts at (its eval is re-run); 0 for a fresh run.
    """

    def __init__(self, out: Path, total_steps: int, resume_step: int = 0):
        self.out = Path(out)
        self.total_steps = total_steps
        self.rows = [r for r in read_csv(self.out / CSV_FILE) if r["step"] < resume_step]
        self._wall_offset = self.rows[-1]["wall_s"] if self.rows else 0.0
        self._start = time.perf_counter()
        self._write_csv()  # drops the rows from the resumed step on
        try:
            from tensorboardX import SummaryWriter
        except ImportError:
            print("tensorboardX is not installed (pip install so101-mjx[train]): no TensorBoard logs")
            self._tb = None
        else:
            self._tb = SummaryWriter(str(self.out / TB_DIR), purge_step=resume_step or None)

    def __call__(self, step: int, metrics: dict[str, Any]) -> None:
        step = int(step)
        row = {
            "step": step,
            "wall_s": self._wall_offset + time.perf_counter() - self._start,
            "steps_per_s": float(metrics.get("training/sps", math.nan)),
            **{col: float(metrics.get(key, math.nan)) for col, key in EVAL_KEYS.items()},
        }
        self.rows.append(row)
        self._write_csv()
        if self._tb is not None:
            for key, value in metrics.items():
                if "_std" not in key and math.isfinite(float(value)):
                    self._tb.add_scalar(key, float(value), step)
            self._tb.flush()
        print(self.line(row), flush=True)

    def _write_csv(self) -> None:
        """``metrics.csv`` rewritten whole (a few dozen rows) through a rename: never a torn row."""
        text = io.StringIO(newline="")
        writer = csv.DictWriter(text, COLUMNS)
        writer.writeheader()
        writer.writerows({k: row[k] for k in COLUMNS} for row in self.rows)
        atomic_write(self.out / CSV_FILE, text.getvalue())

    def line(self, row: dict[str, float]) -> str:
        pct = 100 * row["step"] / max(self.total_steps, 1)
        return (
            f"[{pct:5.1f}%] step {int(row['step']):>10,}/{self.total_steps:,}  {row['wall_s']:6.0f} s  "
            f"{row['steps_per_s']:7,.0f} steps/s  eval reward {row['eval_reward']:8.3f}  "
            f"success {row['eval_success']:.3f}  length {row['eval_episode_length']:.0f}"
        )

    def close(self, title: str) -> Path | None:
        """Close TensorBoard; write the learning curve PNG (None when matplotlib is missing)."""
        if self._tb is not None:
            self._tb.close()
        return plot(self.rows, self.out / PNG_FILE, title)


def plot(rows: list[dict[str, float]], path: Path, title: str) -> Path | None:
    """Eval reward and success vs env steps."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed (pip install so101-mjx[train]): no learning-curve PNG")
        return None
    steps = [r["step"] for r in rows]
    fig, (ax_r, ax_s) = plt.subplots(1, 2, figsize=(10, 3.8), constrained_layout=True)
    ax_r.plot(steps, [r["eval_reward"] for r in rows], marker="o")
    ax_r.set(xlabel="env steps", ylabel="eval episode reward")
    ax_s.plot(steps, [r["eval_success"] for r in rows], marker="o", color="tab:green")
    ax_s.set(xlabel="env steps", ylabel="eval success rate", ylim=(-0.02, 1.02))
    for ax in (ax_r, ax_s):
        ax.grid(alpha=0.3)
    fig.suptitle(title)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=100)
    plt.close(fig)
    return path
