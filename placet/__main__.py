"""`python -m placet` runs the CLI."""

import sys

from placet.cli import main

if __name__ == "__main__":
    sys.exit(main())
