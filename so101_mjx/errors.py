"""The library's exception type for bad input, its file flavours, and the one for a missing setup.

Everything a user can get wrong — a config field, a CLI value, an env name, a file that is missing
or malformed — raises :class:`InputError` (a ValueError, so ``except ValueError`` still catches it)
with a message naming the field and what is allowed. A :class:`ParameterError` names parameters of the
call, which ``so101-mjx`` spells as the command's options. ``so101-mjx`` reports it as one line with exit
status 2. :class:`SetupError` says that this machine lacks something a call needs (a GL backend
for offscreen frames, a display); ``so101-mjx`` reports it as one line with exit status 1. Any
other exception is a bug and keeps its traceback.
"""

from __future__ import annotations


class InputError(ValueError):
    """Bad input from the user: the message names the field (or file) and what is allowed."""


class ParameterError(InputError):
    """Bad input naming parameters of the call: ``parameters`` are their names as the message writes them
    (``steps``, or ``force=True`` for a switch)."""

    def __init__(self, message: str, *parameters: str):
        super().__init__(message)
        self.parameters = parameters


class MissingFileError(InputError, FileNotFoundError):
    """A file or directory the user named does not exist (also a FileNotFoundError)."""


class ExistingFileError(InputError, FileExistsError):
    """A path the user named exists where a new one is required (also a FileExistsError)."""


class SetupError(RuntimeError):
    """This machine lacks what the call needs (a GL backend, a display, a system library); the
    message says what to install or set."""
