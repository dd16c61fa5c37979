"""A module that takes 2 s to import, like a framework on a cold disk."""

import time

time.sleep(2.0)
