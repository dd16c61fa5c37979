"""`python -m rnnbench …` is the `rnnbench` command."""

import sys

from .cli import main

sys.exit(main())
