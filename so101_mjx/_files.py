"""Writing files so that an interrupted writer leaves the old state or the new one, never a half.

- :func:`atomic_path` / :func:`atomic_write`: one file, written beside its destination and renamed
  over it (a rename replaces a symlink rather than writing through it). Every file so101_mjx writes
  outside a :class:`Transaction` goes through them.
- :class:`Transaction`: several files under one directory, staged in ``<root>/.staging/`` and
  published by renames listed in a manifest. Writing the manifest is the commit point:
  :func:`recover` (run by the next writer) finishes a commit whose manifest exists and discards a
  staging area without one. SIGINT and SIGTERM wait while the renames run. Every published or
  deleted path is confined (:func:`confine`): relative, under the writer's prefixes, inside the root;
  a manifest that breaks this (or is not the JSON a Transaction writes) is refused, never replayed.
- :func:`disk_errors`: an out-of-space, read-only or permission OSError as one line naming the
  path and saying that nothing was changed.

Test hook: with ``SO101_MJX_KILL_AT=<point>:<n>`` set, :func:`kill_point` SIGKILLs the process at
that point (:class:`Transaction`: ``staged`` before the manifest is written, ``publishing`` after
the first rename; ``n`` counts the commits of the process from 1).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from so101_mjx._interrupts import handled
from so101_mjx.errors import InputError, ParameterError

STAGING = ".staging"
MANIFEST = "MANIFEST.json"
KILL_ENV = "SO101_MJX_KILL_AT"
_UMASK = os.umask(0o022)
os.umask(_UMASK)  # read once: files get the permissions open() would give them
DISK_ERRNOS = {errno.ENOSPC: "no space left on device", errno.EDQUOT: "disk quota exceeded",
               errno.EROFS: "read-only file system",
               errno.EACCES: "permission denied", errno.EPERM: "operation not permitted",
               errno.ENAMETOOLONG: "file name too long", errno.EFBIG: "file too large"}


def kill_point(point: str, count: int) -> None:
    """Test hook: SIGKILL this process when ``$SO101_MJX_KILL_AT`` is ``<point>:<count>``."""
    if os.environ.get(KILL_ENV) == f"{point}:{count}":
        os.kill(os.getpid(), signal.SIGKILL)


@contextlib.contextmanager
def disk_errors(what: str | Path) -> Iterator[None]:
    """Re-raise an OSError of :data:`DISK_ERRNOS` as one line: ``<reason> while writing <what>; nothing was
    changed``."""
    try:
        yield
    except OSError as err:
        if err.errno not in DISK_ERRNOS:
            raise
        raise InputError(f"{DISK_ERRNOS[err.errno]} while writing {what}; nothing was changed") from None


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def check_out(*paths: Path | str, parameter: str = "out") -> None:
    """:class:`~so101_mjx.errors.ParameterError` naming the first of ``paths`` (files about to be written) that
    is a directory; ``parameter`` is what chose them. Called before the work that would end in writing them."""
    for path in paths:
        if os.path.isdir(path):
            raise ParameterError(f"{parameter}: {path} is a directory, expected a file path (export writes a file "
                                 "there)", parameter)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """A temporary path beside ``path`` (same suffix, for writers that pick a format by it) to write
    in the block; renamed over ``path`` when the block succeeds, removed when it fails. A rename
    replaces a symlink at ``path`` instead of writing through it; out of space (and the other
    :data:`DISK_ERRNOS`) is one line, with ``path`` as it was."""
    path = Path(path)
    with disk_errors(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.stem[:32]}.", suffix=f".tmp{path.suffix}", dir=path.parent)
        os.close(fd)
        try:
            os.chmod(tmp, 0o666 & ~_UMASK)
            yield Path(tmp)
            _fsync(Path(tmp))
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        _fsync(path.parent)


def atomic_write(path: str | Path, data: bytes | str) -> None:
    """Write ``data`` (str as UTF-8) to ``path`` through :func:`atomic_path`."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data.encode() if isinstance(data, str) else data)


@contextlib.contextmanager
def deferred_signals() -> Iterator[None]:
    """SIGINT and SIGTERM held until the block ends, then delivered to the handlers in place: what
    must happen together is not split by an interrupt. Python runs signal handlers in the main
    thread whichever thread the kernel picks, so the handlers are swapped rather than the thread's
    signal mask (main thread only; elsewhere a no-op)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    try:
        with handled((signal.SIGINT, signal.SIGTERM), lambda signum, frame: caught.append(signum)):
            yield
    finally:
        for signum in caught:
            signal.raise_signal(signum)


def _inside(path: Path, root: Path) -> bool:
    """``path``'s existing directories (symlinks followed) lie within ``root``'s."""
    real, top = os.path.realpath(path.parent), os.path.realpath(root)
    return real == top or real.startswith(top.rstrip(os.sep) + os.sep)


def confine(root: Path, rel: Any, prefixes: tuple[str, ...] = ("",)) -> str:
    """``rel`` when it is a plain relative POSIX path (no ``.``, ``..``, empty or hidden-staging part)
    starting with one of ``prefixes`` whose directories stay inside ``root`` (symlinks followed);
    InputError naming it otherwise."""
    parts = rel.split("/") if isinstance(rel, str) else []
    plain = bool(parts) and "\0" not in rel and "\\" not in rel and all(p not in ("", ".", "..") for p in parts)
    if not (plain and parts[0] != STAGING and rel.startswith(prefixes) and _inside(root / rel, root)):
        allowed = " or ".join(repr(p) for p in prefixes if p) or "the root"
        raise InputError(f"{rel!r} is not a relative path under {allowed} inside {root}")
    return rel


def _read_manifest(root: Path, prefixes: tuple[str, ...]) -> dict[str, list[str]]:
    """The staged manifest, checked as :class:`Transaction` writes it: ``{"replace": [paths], "delete": [paths]}``,
    every path confined to ``prefixes`` in ``root`` and in the staging area; InputError otherwise."""
    stage, path = root / STAGING, root / STAGING / MANIFEST
    refuse = "so101-mjx did not write this staging area: look at it, then remove it to go on"
    try:
        manifest = json.loads(path.read_bytes())
    except ValueError:
        raise InputError(f"{path} is not valid JSON; {refuse}") from None
    if not (isinstance(manifest, dict) and set(manifest) == {"replace", "delete"}
            and all(isinstance(v, list) for v in manifest.values())):
        raise InputError(f"{path} must be a JSON object {{\"replace\": [paths], \"delete\": [paths]}}; {refuse}")
    for rel in manifest["replace"] + manifest["delete"]:
        try:
            confine(root, rel, prefixes)
            confine(stage, rel)
        except InputError as err:
            raise InputError(f"{path}: {err}; {refuse}") from None
        if (stage / rel).is_symlink():
            raise InputError(f"{path}: the staged {rel!r} is a symbolic link; {refuse}")
    return manifest


def recover(root: str | Path, prefixes: tuple[str, ...] = ("",)) -> bool:
    """Finish the commit staged under ``root`` if its manifest was written, else discard the staging
    area. True when a commit was finished. InputError, with nothing changed, when the staging area is
    not one a :class:`Transaction` with these ``prefixes`` writes (:func:`confine`). Callers hold
    ``root``'s writer lock."""
    root = Path(root)
    stage = root / STAGING
    if stage.is_symlink():
        raise InputError(f"{stage} is a symbolic link; so101-mjx did not write this staging area: look at it, then "
                         "remove it to go on")
    if not (stage / MANIFEST).is_file():
        shutil.rmtree(stage, ignore_errors=True)
        return False
    _publish(root, _read_manifest(root, prefixes))
    return True


def _publish(root: Path, manifest: dict[str, list[str]]) -> None:
    """Apply a manifest: ``replace`` renames staged files into place, then ``delete`` removes files
    (both idempotent, so a publish cut short can run again); then the staging area goes."""
    stage = root / STAGING
    for n, rel in enumerate(manifest["replace"]):
        if (stage / rel).exists():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            os.replace(stage / rel, root / rel)
        if n == 0:
            kill_point("publishing", Transaction.commits)
    for rel in manifest["delete"]:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(root / rel)
    for directory in {(root / rel).parent for rel in manifest["replace"] + manifest["delete"]}:
        if directory.is_dir():
            _fsync(directory)
    os.unlink(stage / MANIFEST)
    shutil.rmtree(stage, ignore_errors=True)


class Transaction:
    """Files staged under ``<root>/.staging/`` and published together by :meth:`commit`.

    :meth:`path` gives the staging path of a file relative to ``root`` (published in the order
    asked, so the file that marks a state complete goes last); :meth:`delete` removes a file at
    publication; :meth:`scratch` is a directory for temporary files that are never published.
    Callers hold ``root``'s writer lock (:func:`so101_mjx._lock.exclusive`).
    """

    commits = 0  # commits begun by this process (the kill_point count)

    def __init__(self, root: str | Path, prefixes: tuple[str, ...] = ("",)):
        self.root, self.prefixes = Path(root), prefixes  # every published or deleted path starts with one of prefixes
        recover(self.root, prefixes)
        self.dir = self.root / STAGING
        self.dir.mkdir(parents=True)
        self.replace: list[str] = []
        self.deletes: list[str] = []
        self.published = False  # the manifest is written: the commit happens (now, or by the next writer's recover)

    def path(self, rel: str) -> Path:
        """Where to write the file published at ``root/rel`` (InputError when :func:`confine` refuses it)."""
        confine(self.root, rel, self.prefixes)
        if rel in self.replace:
            self.replace.remove(rel)
        self.replace.append(rel)
        path = self.dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def delete(self, rel: str) -> None:
        """Remove ``root/rel`` at publication (InputError when :func:`confine` refuses it)."""
        self.deletes.append(confine(self.root, rel, self.prefixes))

    def unstage(self) -> None:
        """Forget the files staged for publication (the scratch directory stays)."""
        for rel in self.replace:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.dir / rel)
        self.replace, self.deletes = [], []

    def scratch(self) -> Path:
        path = self.dir / ".scratch"
        path.mkdir(exist_ok=True)
        return path

    def commit(self) -> None:
        """Sync the staged files, write the manifest (the commit point), publish."""
        Transaction.commits += 1
        for rel in self.replace:
            _fsync(self.dir / rel)
        kill_point("staged", Transaction.commits)
        with deferred_signals():
            atomic_write(self.dir / MANIFEST, json.dumps({"replace": self.replace, "delete": self.deletes}))
            self.published = True
            _publish(self.root, {"replace": self.replace, "delete": self.deletes})

    def abort(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)
