"""`python -m placet` runs the CLI."""

import sys

from placet.cli import run

if __name__ == "__main__":
    sys.exit(run())
