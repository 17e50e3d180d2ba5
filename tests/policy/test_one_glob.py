"""One glob syntax: a policy rule and a search tool read the same pattern the same way."""

from __future__ import annotations

import pytest

from caisson.policy import glob_match
from caisson.tools.text import glob_regex

CASES = [
    ("src/**.py", "src/a.py"),
    ("src/**.py", "src/deep/a.py"),
    ("src/**/*.py", "src/deep/a.py"),
    ("src/**/*.py", "src/a.py"),
    ("**/.env", "a/b/.env"),
    ("*.{pem,key}", "id.key"),
    ("{a,{b,c}}/x", "c/x"),
    ("[!.]*", ".hidden"),
    ("[ab]?", "bz"),
    ("a\\*b", "a*b"),
    ("a\\*b", "axb"),
    ("**", "any/thing/at/all"),
    ("a/**", "a/b/c"),
    ("a/**/b", "a/b"),
]


@pytest.mark.parametrize(("pattern", "path"), CASES, ids=[f"{p}~{q}" for p, q in CASES])
def test_policy_and_tools_agree(pattern: str, path: str) -> None:
    assert glob_match("/" + pattern, "/" + path) == (glob_regex(pattern).fullmatch(path) is not None)


def test_globstar_only_as_a_whole_segment() -> None:
    # As in gitignore and ripgrep: "**" glued to a name is a plain "*".
    assert glob_match("/src/**.py", "/src/a.py") and not glob_match("/src/**.py", "/src/deep/a.py")
