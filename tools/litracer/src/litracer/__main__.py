"""``python -m litracer``."""

import sys

from litracer._cli import main

sys.exit(main())
