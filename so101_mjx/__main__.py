"""``python -m so101_mjx ...`` is ``so101-mjx ...``."""

import sys

from so101_mjx.cli import main

sys.exit(main())
