"""python3 -m netblk: the netblk command (client/ on the module path)."""

import sys

from .cli import run

if __name__ == "__main__":
    sys.exit(run())
