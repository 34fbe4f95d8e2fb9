"""Progress of the long phases of commands on a terminal: a line naming each phase, and tqdm bars of frames,
episodes and steps. Both go to stderr, and only where it is a terminal: logs (a file, CI) hold the results,
and an error stays one line."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")


def phase(text: str) -> None:
    """One line on a terminal's stderr saying what a command is doing now (``"eval c: compiling ..."``); nothing
    when stderr is not a terminal."""
    if _terminal():
        write(text, sys.stderr)


def write(text: str, file: Any = None) -> None:
    """``print(text, file=file or sys.stdout, flush=True)``; on a terminal, above the bars (whole lines, the bars
    redrawn below)."""
    out = sys.stdout if file is None else file
    if not _terminal():
        print(text, file=out, flush=True)
        return
    from tqdm import tqdm

    tqdm.write(text, file=out)
    out.flush()


def bar(total: int, what: str, unit: str) -> Any:
    """A tqdm bar of ``total`` ``unit``s on a terminal's stderr (``update(n)``, ``set_postfix_str``, ``close``);
    disabled, and silent, when stderr is not a terminal."""
    from tqdm import tqdm

    sized = _terminal() and _columns() > 0  # a terminal that reports no size (some pseudo-terminals) gets 80 columns
    return tqdm(total=total, desc=what, unit=unit, file=sys.stderr, disable=not _terminal(), dynamic_ncols=sized,
                ncols=None if sized else 80, mininterval=0.5)


def advance(shown: Any, done: int, total: int, postfix: str, line: str) -> None:
    """On a terminal, the bar ``shown`` (:func:`bar`) advanced to ``done`` with ``postfix`` beside it; elsewhere
    ``line`` on stderr every tenth of ``total`` and at the end."""
    if not shown.disable:
        shown.set_postfix_str(postfix, refresh=False)
        shown.update(done - shown.n)
    elif done % max(total // 10, 1) == 0 or done == total:
        print(line, file=sys.stderr, flush=True)


def each(items: Iterable[T], total: int, what: str, unit: str) -> Iterator[T]:
    """``items``, counted by a :func:`bar` as they are consumed."""
    progress = bar(total, what, unit)
    try:
        for item in items:
            yield item
            progress.update(1)
    finally:
        progress.close()


def _columns() -> int:
    try:
        return os.get_terminal_size(sys.stderr.fileno()).columns
    except (OSError, ValueError, AttributeError):
        return 0


def _terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # a replaced or closed stderr
        return False
