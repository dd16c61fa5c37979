"""docs/PYTHON_API.md's pytest example runs as written (a doc whose example broke would teach
the wrong API)."""

import re
from pathlib import Path

DOC = Path(__file__).resolve().parent.parent / "docs" / "PYTHON_API.md"


def test_the_documented_pytest_example_passes(tmp_path):
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)
    assert len(blocks) == 1
    namespace: dict = {}
    exec(compile(blocks[0], str(DOC), "exec"), namespace)
    tests = [value for name, value in namespace.items() if name.startswith("test_")]
    assert tests
    for test in tests:
        test(tmp_path)
