"""Write the per-op tables of docs/protocol.md from the daemon's declaration of its ops
(sandbox/opspec.py), between the markers that hold them; ``--check`` only says whether the
document is current (exit 1 when not). Run with the project's environment: it imports
``caisson._sandbox.opspec``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from caisson._sandbox import opspec

DOC = Path(__file__).resolve().parents[1] / "docs" / "protocol.md"
BEGIN = "<!-- ops: generated from sandbox/opspec.py by scripts/protocol_tables.py; edit them there -->"
END = "<!-- /ops -->"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _result(out: opspec.Out) -> str:
    fields = " [{%s}]" % ", ".join(f"`{name}`" for name in out.fields) if out.fields else ""
    note = f" ({out.doc})" if out.doc else ""
    return f"`{out.name}`{fields}{note}"


def render() -> str:
    parts = [BEGIN]
    for op in opspec.OPS:
        parts += ["", f"### `{op.name}`", "", op.doc, ""]
        if op.args:
            parts += ["| arg | type | default | meaning |", "|---|---|---|---|"]
            parts += [
                f"| `{name}` | {kind} | {_cell(default)} | {_cell(meaning)} |"
                for name, kind, default, meaning in opspec.describe(op)
            ]
        else:
            parts.append("No arguments.")
        parts += ["", "Result: " + ("; ".join(_result(out) for out in op.results) if op.results else "none") + "."]
        if op.blob_in:
            parts.append(f"Blob in: {op.blob_in}.")
        if op.blob_out:
            parts.append(f"Blob out: {op.blob_out}.")
    parts.append(END)
    return "\n".join(parts)


def current(text: str) -> str:
    """``text`` with its generated section replaced by a fresh one."""
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise SystemExit(f"{DOC} has no {BEGIN!r} ... {END!r} section")
    return text[:start] + render() + text[end + len(END) :]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 when the tables are not current")
    args = parser.parse_args()
    text = DOC.read_text()
    fresh = current(text)
    if args.check:
        if fresh != text:
            print(f"{DOC} is not current: run python scripts/protocol_tables.py", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(fresh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
