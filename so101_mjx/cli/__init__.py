"""The ``so101-mjx`` command line; ``so101_mjx.cli:main`` is the console script."""

from so101_mjx.cli.main import main

__all__ = ["main"]
