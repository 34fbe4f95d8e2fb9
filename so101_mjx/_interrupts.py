"""Stops from outside a command: SIGTERM (kill, docker stop, systemd) handled as Ctrl-C.

:func:`sigterm_interrupts` makes SIGTERM raise ``KeyboardInterrupt("signal 15")`` as Ctrl-C raises one,
so a command's clean-up runs for both; :func:`stop_name` tells them apart; :func:`stop_point` raises a stop
again where its first ``KeyboardInterrupt`` was lost (a signal handler can run inside a garbage-collector callback
or a ``__del__``, where Python prints an exception and drops it), so no stop is missed; :func:`interruptible` wraps a
command's ``run`` so that either ends in one line saying what was kept (:func:`interrupted`), exit status
:data:`INTERRUPTED`; :func:`shielded` keeps a second signal from cutting a clean-up short (``deploy``
disconnecting a follower, which disables its torque).
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import signal
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

INTERRUPTED = 130  # the exit status of a command stopped by Ctrl-C or SIGTERM (128 + SIGINT, as a shell reports Ctrl-C)
SIGTERM_TEXT = f"signal {int(signal.SIGTERM)}"  # the KeyboardInterrupt's message (record's handler raises the same)
_pending: list[int] = []  # the signal of a stop raised in sigterm_interrupts and not yet seen by as_interrupt


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


class _QuietInterrupts(logging.Filter):
    """Drops a log record that carries an interrupt: JAX logs "jax.pure_callback failed" with the traceback of
    a Ctrl-C or SIGTERM that landed in a host callback before it re-raises it, and the command reports the stop
    in one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        kind = record.exc_info[0] if record.exc_info else None
        return not (kind is not None and issubclass(kind, KeyboardInterrupt))


JAX_CALLBACK_LOGGER = "jax._src.callback"


@contextlib.contextmanager
def handled(signals: Iterable[int], handler: Callable) -> Iterator[None]:
    """Within the block ``handler`` takes ``signals``; their previous handlers are restored after (one set
    outside Python, which :func:`signal.signal` reports as None, as the default). Main thread only."""
    previous = {sig: signal.signal(sig, handler) for sig in signals}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, signal.SIG_DFL if old is None else old)


def _stop(signum: int) -> KeyboardInterrupt:
    return KeyboardInterrupt(SIGTERM_TEXT) if signum == signal.SIGTERM else KeyboardInterrupt()


def _interrupt(signum, frame):
    _pending.append(signum)
    raise _stop(signum)


def stop_point() -> None:
    """Raise the stop (Ctrl-C or SIGTERM) that :func:`sigterm_interrupts` took and whose ``KeyboardInterrupt``
    was lost before any handler saw it; a no-op otherwise. Long loops call it once per item."""
    if _pending:
        raise _stop(_pending.pop())


@contextlib.contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """Within the block SIGTERM raises ``KeyboardInterrupt("signal 15")`` and Ctrl-C, unless ignored,
    ``KeyboardInterrupt()`` (main thread only; elsewhere a no-op); a stop whose ``KeyboardInterrupt`` was lost is
    raised again at :func:`stop_point` or, at the latest, when the block ends. JAX's log of an interrupt inside a
    host callback (:class:`_QuietInterrupts`) is dropped."""
    quiet, logger = _QuietInterrupts(), logging.getLogger(JAX_CALLBACK_LOGGER)
    logger.addFilter(quiet)
    try:
        if not _main_thread():
            yield
            return
        taken = [signal.SIGTERM] + ([signal.SIGINT] if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN else [])
        with handled(taken, _interrupt):  # an ignored Ctrl-C stays ignored
            try:
                yield
                stop_point()
            finally:
                _pending.clear()  # the block ends: a stop it took has been raised
    finally:
        logger.removeFilter(quiet)


@contextlib.contextmanager
def shielded(what: str) -> Iterator[None]:
    """Within the block SIGINT and SIGTERM are noted on stderr (``what`` says what runs first) and
    otherwise ignored: a clean-up already under way finishes (main thread only; elsewhere a no-op)."""
    if not _main_thread():
        yield
        return

    def note(signum, frame):
        print(f"{signal.Signals(signum).name} received while {what}: finishing that first", file=sys.stderr, flush=True)

    with handled((signal.SIGINT, signal.SIGTERM), note):
        yield


def as_interrupt(err: BaseException) -> KeyboardInterrupt | None:
    """``err`` as the stop it stands for, or None. A Ctrl-C or SIGTERM that lands while a jitted step
    runs a host callback (backend ``c``'s physics) reaches the caller wrapped in JAX's runtime error,
    which quotes the ``KeyboardInterrupt``; it is a stop all the same."""
    if isinstance(err, KeyboardInterrupt):
        stop = err
    else:
        text = str(err)
        if "KeyboardInterrupt" not in text:
            return None
        stop = KeyboardInterrupt(SIGTERM_TEXT) if f"KeyboardInterrupt: {SIGTERM_TEXT}" in text else KeyboardInterrupt()
    _pending.clear()  # the stop has reached a handler
    return stop


def stop_name(err: KeyboardInterrupt) -> str:
    """``"SIGTERM"`` for the interrupt :func:`sigterm_interrupts` raises, else ``"Ctrl-C"``."""
    return "SIGTERM" if err.args == (SIGTERM_TEXT,) else "Ctrl-C"


def interrupted(command: str, err: KeyboardInterrupt, kept: str) -> int:
    """Print ``<command>: stopped by Ctrl-C|SIGTERM; <kept>`` on stderr and return :data:`INTERRUPTED`."""
    print(f"{command}: stopped by {stop_name(err)}; {kept}", file=sys.stderr, flush=True)
    return INTERRUPTED


def interruptible(command: str, kept: Callable[[Any], str]) -> Callable:
    """Decorate a command's ``run(args)``: SIGTERM taken as Ctrl-C, and either ends in :func:`interrupted`'s
    one line (``kept(args)`` says what was kept) instead of a traceback."""

    def wrap(run: Callable[[Any], int]) -> Callable[[Any], int]:
        @functools.wraps(run)
        def guarded(args: Any) -> int:
            try:
                with sigterm_interrupts():
                    return run(args)
            except BaseException as err:  # Ctrl-C or SIGTERM, also when JAX wrapped it (as_interrupt); else re-raised
                stop = as_interrupt(err)
                if stop is None:
                    raise
                return interrupted(command, stop, kept(args))

        return guarded

    return wrap


def dataset_kept(root: str | Path) -> str:
    """``"the dataset at ROOT holds N complete episodes"``: its ``meta/info.json``'s count (0 without one)."""
    info = Path(root) / "meta" / "info.json"
    try:
        total = json.loads(info.read_text())["total_episodes"] if info.is_file() else 0
    except (OSError, ValueError, KeyError, TypeError):
        return f"the dataset at {root} holds its committed episodes"
    return f"the dataset at {root} holds {total} complete episodes"
