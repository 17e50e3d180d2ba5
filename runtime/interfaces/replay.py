"""`caisson replay`: run a recorded trajectory (JSON lines of tool calls) in one fresh session."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path

from caisson.errors import CaissonError
from caisson.policy import Level, Policy
from caisson.runtime import Runtime
from caisson.tools.base import ToolResult


def _lines(path: str) -> list[str]:
    if path == "-":
        return sys.stdin.read().splitlines()
    try:
        return Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise CaissonError(f"cannot read the trajectory file {path}: {exc}") from None


async def replay_file(path: str, *, profile: str = "caisson", approve_all: bool = False) -> AsyncIterator[str]:
    """Yield one JSON result per input line. A bad line yields an error result; the rest still run."""
    lines = _lines(path)
    policy = Policy(auto_approve=Level.DANGEROUS) if approve_all else Policy.from_env()
    async with Runtime() as rt, rt.session(profile=profile, policy=policy) as s:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                call = json.loads(line)
                tool, args = call["tool"], call.get("args", {})
                if not isinstance(tool, str) or not isinstance(args, dict):
                    raise TypeError("'tool' must be a string and 'args' an object")
            except (ValueError, KeyError, TypeError) as exc:
                bad = ToolResult.failure("invalid_line", f"line {number}: not a tool call: {exc}")
                yield bad.model_dump_json()
                continue
            result = await s.call(tool, args)
            yield result.model_dump_json()
