"""The library's one exception type for bad input, and its file flavours.

Everything a user can get wrong — a config field, a CLI value, an env name, a file that is missing
or malformed — raises :class:`InputError` (a ValueError, so ``except ValueError`` still catches it)
with a message naming the field and what is allowed. ``so101-mjx`` reports it as one line with exit
status 2; any other exception is a bug and keeps its traceback.
"""

from __future__ import annotations


class InputError(ValueError):
    """Bad input from the user: the message names the field (or file) and what is allowed."""


class MissingFileError(InputError, FileNotFoundError):
    """A file or directory the user named does not exist (also a FileNotFoundError)."""


class ExistingFileError(InputError, FileExistsError):
    """A path the user named exists where a new one is required (also a FileExistsError)."""
