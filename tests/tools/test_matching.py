"""Host-side logic of the file tools without a container: edit matching stages, diffs and
patches, globs, .gitignore rules, ripgrep's file selection, and the grep regex dialect."""

from __future__ import annotations

import pytest

from caisson.client.models import WalkEntry, WalkResult
from caisson.tools.base import ToolError
from caisson.tools.files import matching
from caisson.tools.files.patch import apply_hunks, parse_patch
from caisson.tools.search.grep import check_pattern
from caisson.tools.search.listing import IgnoreRules, select_files
from caisson.tools.text import GitGlob, changed_lines, glob_regex, unified_diff


def apply(content: str, old: str, new: str, **kw: object) -> tuple[str, matching.Match]:
    found = matching.find(content, old, new, **kw)  # type: ignore[arg-type]
    assert len(found.matches) == 1, found
    m = found.matches[0]
    return content[: m.start] + m.replacement + content[m.end :], m


# ---- matching stages -----------------------------------------------------------------------


def test_exact_match_finds_every_occurrence() -> None:
    found = matching.find("foo bar foo baz foo", "foo", "qux")
    assert [(m.start, m.stage, m.similarity) for m in found.matches] == [
        (0, "exact", 1.0),
        (8, "exact", 1.0),
        (16, "exact", 1.0),
    ]


def test_whitespace_stage_tolerates_indentation_and_reindents_replacement() -> None:
    content = "def f():\n\tif x:\n\t\treturn 1\n\treturn 2\n"
    old = "    if x:\n        return 1\n"
    new = "    if x:\n        return 10\n"
    result, m = apply(content, old, new)
    assert m.stage == "whitespace" and m.similarity == matching.WHITESPACE_SIMILARITY
    # The replacement takes the file's tab indentation, not the agent's spaces.
    assert result == "def f():\n\tif x:\n\t\treturn 10\n\treturn 2\n"


def test_whitespace_stage_inside_a_line_keeps_the_rest_of_the_line() -> None:
    result, m = apply("x = compute(a,  b)   # note\n", "compute(a, b)", "compute(b, a)")
    assert m.stage == "whitespace"
    assert result == "x = compute(b, a)   # note\n"


def test_whitespace_stage_is_off_when_disabled() -> None:
    assert matching.find("a  b\n", "a b", "c", whitespace=False).matches == []


def test_fuzzy_stage_only_when_enabled_and_reports_similarity() -> None:
    content = "one\ndef handler(request):\n    return respond(request)\nthree\n"
    old = "def handler(req):\n    return respond(req)"
    assert matching.find(content, old, "X").matches == []
    found = matching.find(content, old, "def handler(r):\n    return respond(r)", fuzzy=True)
    (m,) = found.matches
    assert m.stage == "fuzzy" and 0.7 <= m.similarity < 1.0
    assert content[m.start : m.end] == "def handler(request):\n    return respond(request)"


def test_fuzzy_threshold_edge_is_inclusive() -> None:
    # Levenshtein similarity of these two lines is exactly 1 - 3/10 = 0.7.
    content = "keep\nabcdefgXYZ\nkeep\n"
    assert matching.find(content, "abcdefghij", "new", fuzzy=True, threshold=0.7).matches[
        0
    ].similarity == pytest.approx(0.7)
    missed = matching.find(content, "abcdefghij", "new", fuzzy=True, threshold=0.71)
    assert missed.matches == [] and missed.best_similarity == pytest.approx(0.7) and missed.best_line == 2


def test_crlf_file_matches_lf_needle_and_keeps_crlf() -> None:
    result, m = apply("a\r\nb\r\nc\r\n", "a\nb\n", "x\ny\n")
    assert m.stage == "exact"
    assert result == "x\r\ny\r\nc\r\n"


def test_file_without_final_newline_is_not_damaged() -> None:
    result, _ = apply("first\nlast line", "last line", "final line")
    assert result == "first\nfinal line"


def test_multibyte_utf8_offsets() -> None:
    result, _ = apply("naïve = '日本語'\nrésumé = 1\n", "résumé", "cv")
    assert result == "naïve = '日本語'\ncv = 1\n"


# ---- diffs and patches ---------------------------------------------------------------------


def test_unified_diff_marks_missing_final_newline_and_changed_lines() -> None:
    diff = unified_diff("a\nb\nc", "a\nB\nc", "x", "y")
    assert diff == "--- x\n+++ y\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n\\ No newline at end of file\n"
    assert changed_lines("a\nb\nc\n", "a\nB\nC\nc\n") == (2, 3)
    assert unified_diff("same", "same") == ""


def test_patch_round_trip_on_large_file_with_moved_hunks() -> None:
    original = "".join(f"line {i}\n" for i in range(1, 200))
    modified = original.replace("line 10\n", "line ten\n").replace("line 150\n", "")
    patch = unified_diff(original, modified, "a/f.txt", "b/f.txt")
    (section,) = parse_patch(patch)
    assert section.old_path == "f.txt" and len(section.hunks) == 2
    assert apply_hunks(original, section.hunks, "f.txt") == modified
    # Five lines inserted at the top: the hunks are found further down by their context.
    shifted = "".join(f"new {i}\n" for i in range(5)) + original
    assert apply_hunks(shifted, section.hunks, "f.txt") == "".join(f"new {i}\n" for i in range(5)) + modified


def test_patch_hunk_that_does_not_apply_names_the_hunk() -> None:
    original = "".join(f"line {i}\n" for i in range(1, 40))
    patch = unified_diff(original, original.replace("line 5\n", "five\n").replace("line 30\n", "thirty\n"))
    with pytest.raises(ToolError) as err:
        apply_hunks(original.replace("line 31\n", "changed\n"), parse_patch(patch)[0].hunks, "f.txt")
    assert err.value.code == "patch_failed" and "Hunk 2 (@@ -27,7 +27,7 @@)" in err.value.message


def test_patch_keeps_crlf_and_handles_no_newline_markers() -> None:
    no_newline = "\\ No newline at end of file\n"
    patch = f"--- a/f\n+++ b/f\n@@ -1,2 +1,3 @@\n one\n-two\n{no_newline}+2\n+three\n{no_newline}"
    assert apply_hunks("one\r\ntwo", parse_patch(patch)[0].hunks, "f") == "one\r\n2\r\nthree"


# ---- globs and .gitignore ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "path", "hit"),
    [
        ("*.rs", "main.rs", True),
        ("*.rs", "src/main.rs", False),
        ("**/*.rs", "src/deep/main.rs", True),
        ("**/*.rs", "main.rs", True),
        ("src/**", "src/a/b.txt", True),
        ("src/*.{ts,tsx}", "src/a.tsx", True),
        ("src/*.{ts,tsx}", "src/a.js", False),
        ("f?le.[ch]", "file.h", True),
        ("f[!i]le.c", "file.c", False),
        ("{a,b/{c,d}}/x", "b/d/x", True),
    ],
)
def test_glob_syntax(pattern: str, path: str, hit: bool) -> None:
    assert (glob_regex(pattern).fullmatch(path) is not None) is hit


def paths(entries: list[WalkEntry]) -> list[str]:
    return [e.path for e in entries]


def walk(*entries: tuple[str, str]) -> WalkResult:
    return WalkResult(entries=[WalkEntry(path=p, type=t) for p, t in entries])  # type: ignore[arg-type]


TREE = walk(
    ("build", "dir"),
    ("build/out.py", "file"),
    ("keep.log", "file"),
    ("a.log", "file"),
    (".env.example", "file"),
    (".secret", "file"),
    ("src", "dir"),
    ("src/x.py", "file"),
    ("src/gen", "dir"),
    ("src/gen/g.py", "file"),
    ("src/pkg", "dir"),
    ("src/pkg/b.log", "file"),
    ("src/pkg/y.py", "file"),
    ("src/.h.py", "file"),
    ("link.py", "symlink"),
    ("rootonly.txt", "file"),
    ("src/rootonly.txt", "file"),
)
IGNORES = {"": "build/\n*.log\n!keep.log\n!.env.example\n/rootonly.txt\n", "src": "gen/\n", "src/pkg": "!*.log\n"}


def test_gitignore_semantics_nested_negation_directories_and_anchors() -> None:
    rules = IgnoreRules("/w", IGNORES, {"/": "*.pyc\n"})
    files = [e.path for e in select_files(TREE, rules, [], [], include_hidden=True)]
    assert files == [
        "keep.log",
        ".env.example",
        ".secret",
        "src/x.py",
        "src/pkg/b.log",
        "src/pkg/y.py",
        "src/.h.py",
        "src/rootonly.txt",
    ]
    assert rules.state("z.pyc", False) is True  # a parent directory's .gitignore applies too


def test_ripgrep_selection_overrides_types_and_hidden() -> None:
    rules = IgnoreRules("/w", IGNORES, {})
    plain = paths(select_files(TREE, rules, [GitGlob("!.git")], [], include_hidden=False))
    # A re-included hidden file is searched; other hidden files and symlinks are not.
    assert plain == ["keep.log", ".env.example", "src/x.py", "src/pkg/b.log", "src/pkg/y.py", "src/rootonly.txt"]
    # A --glob whitelist beats .gitignore and hiddenness for files (not for ignored dirs).
    logs = paths(select_files(TREE, rules, [GitGlob("*.log"), GitGlob("!.git")], [], include_hidden=False))
    assert logs == ["keep.log", "a.log", "src/pkg/b.log"]
    py = paths(select_files(TREE, rules, [GitGlob("!.git")], [GitGlob("*.py")], include_hidden=False))
    assert py == ["src/x.py", "src/pkg/y.py", "src/.h.py"]


@pytest.mark.parametrize(
    "pattern",
    [r"(?<=a)b", r"(a)\1", r"\p{L}", r"[[:alpha:]]", r"a{", r"x{,2}", r"a*+", r"\Aabc", r"end\Z", r"[a-z&&[^b]]"],
)
def test_grep_dialect_rejects_what_the_engines_disagree_on(pattern: str) -> None:
    with pytest.raises(ToolError) as err:
        check_pattern(pattern, literal=False, multiline=False)
    assert err.value.code == "invalid_pattern"


@pytest.mark.parametrize("pattern", [r"fn\s+main\(", r"a{2,3}?", r"(?i)error", r"(?P<n>\w+)\.rs", r"[\]x]", r"\x41b}"])
def test_grep_dialect_accepts_the_common_subset(pattern: str) -> None:
    check_pattern(pattern, literal=False, multiline=False)


def test_grep_dialect_drops_escapes_ripgrep_refuses() -> None:
    assert check_pattern(r"src\/main\:\ x\.rs", literal=False, multiline=False) == r"src/main:[ ]x\.rs"
    assert check_pattern(r"[\/\-]", literal=False, multiline=False) == r"[/\-]"


def test_newline_in_pattern_needs_multiline() -> None:
    with pytest.raises(ToolError):
        check_pattern("a\\nb", literal=False, multiline=False)
    check_pattern("a\\nb", literal=False, multiline=True)
    check_pattern("a{", literal=True, multiline=False)
