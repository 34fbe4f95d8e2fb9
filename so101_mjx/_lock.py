"""One writer per output directory: an exclusive ``fcntl.flock`` on ``<directory>/.so101_mjx.lock``.

``so101-mjx train`` and ``so101-mjx record`` hold it for as long as they write. A second writer is
refused with one line naming the holder's pid. The kernel releases a lock when its process ends,
however it ends, so a lock file left by a killed run never blocks the next one (its pid is
simply overwritten). The lock file is opened without following a symlink, and a directory holding
a symlink anywhere inside it is refused: a writer never writes through a link to a file elsewhere.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from so101_mjx._files import disk_errors
from so101_mjx.errors import InputError

LOCK_FILE = ".so101_mjx.lock"


@contextlib.contextmanager
def exclusive(directory: str | Path, what: str) -> Iterator[Path]:
    """Hold ``directory``'s writer lock (creating the directory); ``what`` names the writer in the refusal."""
    directory = Path(directory)
    with disk_errors(directory):
        directory.mkdir(parents=True, exist_ok=True)
    path = directory / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as err:  # ELOOP: a symlink in its place; EACCES: not writable
        raise InputError(f"cannot lock {path} ({os.strerror(err.errno or 0)}): so101-mjx writes only "
                         "where it can lock") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            raise InputError(f"{directory} is being written by another so101-mjx process (pid {holder}); "
                             f"one {what} per directory: wait for it, or choose another directory") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        _refuse_symlinks(directory)
        yield path
    finally:
        os.close(fd)  # releases the lock


def _refuse_symlinks(directory: Path) -> None:
    """InputError naming the first symlink found inside ``directory`` (links are not followed)."""
    for root, dirs, files in os.walk(directory):
        for name in sorted(dirs + files):
            if os.path.islink(os.path.join(root, name)):
                link = Path(root, name)
                raise InputError(f"{link} is a symlink (to {os.readlink(link)}): so101-mjx does not write "
                                 "through links inside an output directory; replace it with a file or choose "
                                 "another directory")
