"""`python -m opbench …` is the `opbench` command."""

import sys

from .cli import main

sys.exit(main())
