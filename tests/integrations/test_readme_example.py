"""The README's eval-harness example, run exactly as printed."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_harness_example_in_the_readme_runs() -> None:
    text = README.read_text()
    block = re.search(r"<!-- harness-example -->\n```python\n(.*?)```", text, re.S)
    assert block is not None, "the README lost its harness example"
    done = subprocess.run([sys.executable, "-c", block.group(1)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "-    return a - b\n+    return a + b" in done.stdout
