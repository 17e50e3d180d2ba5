"""The bypass corpus (tests/policy/bash_corpus.py): every row reaches at least its level,
ordinary commands stay below dangerous, and the rates are printed."""

from __future__ import annotations

import pytest

from caisson.policy import Level, classify_bash

from .bash_corpus import BENIGN, BENIGN_COSTS, BYPASSES, all_bypasses

D = Level.DANGEROUS
_ROWS = all_bypasses()


def test_corpus_is_large_enough() -> None:
    assert len(_ROWS) >= 150
    assert len(BYPASSES) >= 6
    assert len({cmd for _, cmd, _ in _ROWS}) == len(_ROWS), "duplicate rows"


@pytest.mark.parametrize(("family", "command", "minimum"), _ROWS, ids=[f"{f}:{c}" for f, c, _ in _ROWS])
def test_bypass_is_not_underrated(family: str, command: str, minimum: Level) -> None:
    result = classify_bash(command)
    assert result.level >= minimum, (family, result.level, result.reasons)


@pytest.mark.parametrize(("command", "maximum"), BENIGN, ids=[c for c, _ in BENIGN])
def test_ordinary_command_is_not_overrated(command: str, maximum: Level) -> None:
    result = classify_bash(command)
    assert result.level <= maximum, result.reasons


def test_rates(capsys: pytest.CaptureFixture[str]) -> None:
    """False-safe: a corpus row below its level; false-dangerous: an ordinary command
    classified dangerous. Fails on any row that should be dangerous and is not."""
    under = [(f, c, m, classify_bash(c).level) for f, c, m in _ROWS]
    misses = [row for row in under if row[3] < row[2]]
    dangerous_rows = [row for row in under if row[2] is D]
    dangerous_misses = [row for row in dangerous_rows if row[3] < D]
    ordinary = [c for c, _ in BENIGN] + BENIGN_COSTS
    over = [c for c in ordinary if classify_bash(c).level is D]
    lines = [
        "",
        f"bash corpus: {len(_ROWS)} bypass rows in {len(BYPASSES)} families, {len(ordinary)} ordinary commands",
        f"  false-safe (below expected level): {len(misses)}/{len(_ROWS)} = {len(misses) / len(_ROWS):.1%}",
        f"  dangerous rows classified safe/cautious: {len(dangerous_misses)}/{len(dangerous_rows)}"
        f" = {len(dangerous_misses) / len(dangerous_rows):.1%}",
        f"  false-dangerous (ordinary classified dangerous): {len(over)}/{len(ordinary)}"
        f" = {len(over) / len(ordinary):.1%}",
    ]
    for family in BYPASSES:
        rows = [r for r in under if r[0] == family]
        missed = [r for r in rows if r[3] < r[2]]
        lines.append(f"    {family}: {len(missed)}/{len(rows)} below level")
    lines += [f"  MISSED {m.value}>{got.value}: {c!r}" for _, c, m, got in misses]
    with capsys.disabled():
        print("\n".join(lines))
    assert not dangerous_misses, [c for _, c, _, _ in dangerous_misses]
    assert not misses, [c for _, c, _, _ in misses]


@pytest.mark.parametrize(
    ("command", "cwd", "expected"),
    [
        ("touch hooks/pre-commit", "/workspace/.git", D),
        ("cd .git && touch config", "/workspace", D),
        ("cd app && touch x", "/workspace", Level.CAUTIOUS),
        ("cd ../.. && touch x", "/workspace/app", D),
        ("cd .. && touch x", "/workspace/app", Level.CAUTIOUS),
        ("pushd app && touch x && popd", "/workspace", Level.CAUTIOUS),
        ("pushd app; popd; touch x", "/workspace", D),
        ("cat ../.env", "/workspace/app", D),
        ("cat *", "/workspace", D),
        ("cat docs/guide-*.txt", "/workspace", Level.SAFE),
        ("cat docs/*.txt", "/workspace", D),  # credentials.txt is a secret name
        ("cd /workspace/app && cat .e*", None, D),
        ("git status", "/workspace/app", Level.SAFE),
        ("cd app && git status", "/workspace", D),
    ],
)
def test_paths_resolve_against_the_directory_the_command_runs_in(command: str, cwd: str | None, expected: Level) -> None:
    assert classify_bash(command, cwd=cwd).level is expected, classify_bash(command, cwd=cwd).reasons
