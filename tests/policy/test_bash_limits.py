"""The classifier's resource guards: deep nesting and huge lines come back dangerous, fast,
in bounded memory, and never as a RecursionError."""

from __future__ import annotations

import time
import tracemalloc

import pytest

from caisson.policy import Level, classify_bash

N = 10_000


def _backquotes(levels: int) -> str:
    """Backquotes nested ``levels`` deep, each level escaping the one inside (as bash needs)."""
    inner = "ls"
    for _ in range(levels):
        inner = "echo `" + inner.replace("\\", "\\\\").replace("`", "\\`") + "`"
    return inner


DEEP: dict[str, str] = {
    "command substitution": "echo " + "$(" * N + "ls" + ")" * N,
    "quoted substitution": "echo " + '"$(' * N + "ls" + ')"' * N,
    "process substitution": "cat " + "<(" * N + "ls" + ")" * N,
    "backquotes": _backquotes(20),
    "subshell": "( " * N + "ls" + " )" * N,
    "group": "{ " * N + "ls" + "; }" * N,
    "if": "if true; then " * N + "ls" + "; fi" * N,
    "parameter expansion": "echo " + "${x:-" * N + "a" + "}" * N,
    "arithmetic": "echo $((" + "(" * N + "1" + ")" * N + "))",
    "[[ ]] parentheses": "[[ " + "( " * N + "-f x" + " )" * N + " ]]",
    "here-document": "cat <<E\n" + "$(" * N + "ls" + ")" * N + "\nE",
    "eval": "eval " + "'eval " * 200 + "ls" + "'" * 200,
    "bash -c": "bash -c " * N + "ls",
    "wrappers": "nice " * N + "ls",
    "sudo": "sudo " * N + "ls",
    "xargs": "xargs " * N + "ls",
    "find -exec": "find . -exec " * 3000 + "ls" + " ;" * 3000,
    "10 MB of words": "echo " + "a " * (5 * 1024 * 1024),
    "10 MB of pipes": "ls | " * (2 * 1024 * 1024) + "ls",
    "10 MB of substitutions": "echo " + "$(ls)" * (2 * 1024 * 1024),
}


@pytest.mark.parametrize("command", DEEP.values(), ids=list(DEEP))
def test_deep_or_huge_is_dangerous_and_fast(command: str) -> None:
    start = time.perf_counter()
    result = classify_bash(command)
    elapsed = time.perf_counter() - start
    assert result.level is Level.DANGEROUS, result.reasons
    # Under 0.6 s each on a quiet machine; an analysis that grows with the depth takes minutes.
    assert elapsed < 10.0, elapsed


def test_limits_report(capsys: pytest.CaptureFixture[str]) -> None:
    lines = ["", "bash classifier limits: time and peak memory (tracemalloc) per input"]
    for name, command in DEEP.items():
        start = time.perf_counter()
        level = classify_bash(command).level
        elapsed = time.perf_counter() - start
        tracemalloc.start()
        classify_bash(command)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        lines.append(f"  {name:24s} {len(command):>9,d} chars {elapsed * 1000:7.1f} ms {peak / 2**20:6.1f} MiB {level.value}")
        assert level is Level.DANGEROUS
        # Beyond the command itself, a few tens of MiB at most.
        assert peak < 64 * 1024 * 1024, name
    with capsys.disabled():
        print("\n".join(lines))
