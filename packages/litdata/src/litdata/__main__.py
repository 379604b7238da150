"""``python -m litdata``: the same as the ``litdata`` command."""

import sys

from litdata._cli import main

if __name__ == "__main__":
    sys.exit(main())
