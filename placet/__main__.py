"""`python -m placet` runs the CLI."""

import sys

from placet.cli import main

sys.exit(main())
