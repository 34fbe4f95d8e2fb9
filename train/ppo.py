"""``python -m train.ppo [args]`` from the repository root: ``so101-mjx train [args]``."""

import sys

from so101_mjx.cli import main

if __name__ == "__main__":
    sys.exit(main(["train", *sys.argv[1:]]))
