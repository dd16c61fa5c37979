"""scripts/setup prints only the suite's own lines: setuptools' editable install warns on every
install that a folder named like the package may shadow it, which pip (>= 25) relays as a
ten-line BuildBackendWarning banner at the top of scripts/quickstart and scripts/test.

setup ignores that warning by its message (PYTHONWARNINGS, which pip hands to the build
backend). Tested without installing: the real setuptools warning is raised in a child with the
variable setup composes, and recorded the way pip's in-process build hook records it
(warnings.catch_warnings(record=True): what it records, pip prints). Checked once with a real
editable install into a throwaway venv with pip 26.3: the banner without the variable, nothing with it."""

import re
import subprocess
import sys
from pathlib import Path

SETUP = Path(__file__).resolve().parents[1] / "scripts" / "setup"

RECORD = """
import warnings
from setuptools.command.editable_wheel import InformationOnly
from setuptools.warnings import SetuptoolsWarning
with warnings.catch_warnings(record=True) as seen:
    InformationOnly.emit("Editable installation.", "Please be careful with folders in your working directory")
    SetuptoolsWarning.emit("Some other warning.", "which setup must still show")
print([str(w.message).splitlines()[0] for w in seen])
"""


def _quiet_editable() -> str:
    text = SETUP.read_text()
    assert 'PYTHONWARNINGS="${PYTHONWARNINGS:+$PYTHONWARNINGS,}$quiet_editable" \\\n  "$py" -m pip install' in text
    return re.search(r'^quiet_editable="([^"]+)"$', text, re.M).group(1)


def _recorded(pythonwarnings: str) -> str:
    env = {"PYTHONWARNINGS": pythonwarnings, "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-c", RECORD], env=env, capture_output=True, text=True,
                          check=True).stdout.strip()


def test_setup_ignores_the_editable_install_banner_and_no_other_warning():
    quiet = _quiet_editable()
    assert _recorded("") == "['Editable installation.', 'Some other warning.']"  # the banner is there to lose
    assert _recorded(quiet) == "['Some other warning.']"
    assert _recorded(f"default,{quiet}") == "['Some other warning.']"  # a user's own PYTHONWARNINGS kept before it
