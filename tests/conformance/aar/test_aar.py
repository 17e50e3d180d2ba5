"""Seed 003 (Aar built-in tools): each tool's parameters and behaviour, the tool selection
guide, the skipped directories, and the tool-aware system prompt, in a real `aar` session."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from caisson import Runtime, Session
from caisson.policy import Level
from caisson.profiles import get_profile
from caisson.profiles.export import prompt_text
from tests.conformance.conftest import profile_session, sh

pytestmark = pytest.mark.anyio
W = "/workspace"

# Seed 003, "Tool-aware system prompt": the example output, verbatim.
SEED_PROMPT = """Available tools:
- read_file: Read file contents (supports line ranges; large files return a preview)
- write_file: Create or overwrite a file
- edit_file: Replace an exact unique string in a file
- list_directory: List files and directories at a path
- bash: Execute a shell command (returns stdout, stderr, exit code)
- grep: Search file contents with regex
- find_files: Find files by glob pattern

Guidelines:
- Use grep to search file contents (symbols, patterns); use find_files for path/filename searches."""


@pytest.fixture(scope="module")
async def s(rt: Runtime, engine: str) -> AsyncIterator[Session]:
    async with profile_session(rt, "aar", engine) as session:
        yield session


def test_system_prompt_section() -> None:
    """003 "Tool-aware system prompt": "Available tools:" with each prompt_snippet, then
    "Guidelines:" with the prompt_guidelines, exactly as the seed shows."""
    assert prompt_text(get_profile("aar")) == SEED_PROMPT


def test_side_effects_map_to_levels() -> None:
    """003: READ tools are safe, WRITE tools cautious, EXECUTE (bash) dangerous."""
    levels = {name: t.effective_level for name, t in get_profile("aar").tools.items()}
    assert levels == {
        "read_file": Level.SAFE, "write_file": Level.CAUTIOUS, "edit_file": Level.CAUTIOUS,
        "list_directory": Level.SAFE, "bash": Level.DANGEROUS, "grep": Level.SAFE, "find_files": Level.SAFE,
    }


async def test_read_file_line_numbers_and_range(s: Session) -> None:
    """003 read_file: contents with line numbers; start_line / end_line (1-based, inclusive, 0 =
    start / end of file); relative paths."""
    await sh(s, f"printf 'alpha\\nbeta\\ngamma\\n' > {W}/small.txt")
    whole = await s.call("read_file", {"path": "small.txt"})
    assert whole.text == "     1\talpha\n     2\tbeta\n     3\tgamma"
    middle = await s.call("read_file", {"path": f"{W}/small.txt", "start_line": 2, "end_line": 2})
    assert middle.text == "     2\tbeta"
    tail = await s.call("read_file", {"path": "small.txt", "start_line": 2})
    assert tail.text == "     2\tbeta\n     3\tgamma"


async def test_read_file_large_file_preview(s: Session) -> None:
    """003 read_file, Large file behaviour: without a range a file over 500 lines returns the total
    line count and a 50-line preview; a range reads the section."""
    await sh(s, f"seq 1 501 > {W}/large.txt")
    r = await s.call("read_file", {"path": "large.txt"})
    assert "501 lines" in r.text
    numbered = [line for line in r.text.split("\n") if "\t" in line]
    assert len(numbered) == 50 and numbered[-1] == "    50\t50"
    section = await s.call("read_file", {"path": "large.txt", "start_line": 400, "end_line": 401})
    assert section.text == "   400\t400\n   401\t401"
    await sh(s, f"seq 1 500 > {W}/edge.txt")
    edge = await s.call("read_file", {"path": "edge.txt"})
    assert len(edge.text.split("\n")) == 500


async def test_write_file(s: Session) -> None:
    """003 write_file: writes content, creating parent directories as needed."""
    r = await s.call("write_file", {"path": "deep/dir/out.txt", "content": "hello"})
    assert r.ok and r.text == f"Wrote 5 bytes to {W}/deep/dir/out.txt"
    assert await sh(s, f"cat {W}/deep/dir/out.txt") == "hello"


async def test_edit_file(s: Session) -> None:
    """003 edit_file: the exact string must appear exactly once."""
    await sh(s, f"printf 'one\\ntwo\\ntwo\\n' > {W}/e.txt")
    r = await s.call("edit_file", {"path": "e.txt", "old_string": "one", "new_string": "ONE"})
    assert r.ok and r.text == f"Edited {W}/e.txt: replaced 1 occurrence"
    twice = await s.call("edit_file", {"path": "e.txt", "old_string": "two", "new_string": "2"})
    assert not twice.ok and twice.text == f"old_string found 2 times in {W}/e.txt — must be unique"
    missing = await s.call("edit_file", {"path": "e.txt", "old_string": "three", "new_string": "3"})
    assert not missing.ok and missing.text == f"old_string not found in {W}/e.txt"
    assert await sh(s, f"cat {W}/e.txt") == "ONE\ntwo\ntwo\n"


async def test_list_directory(s: Session) -> None:
    """003 list_directory: files and directories with types and sizes; path defaults to "."."""
    await sh(s, f"mkdir -p {W}/ls/sub && printf '12345' > {W}/ls/f.txt && touch {W}/ls/.hidden")
    r = await s.call("list_directory", {"path": "ls"})
    assert r.text == f"Contents of {W}/ls:\n\nd sub\nf .hidden  (0 bytes)\nf f.txt  (5 bytes)"
    default = await s.call("list_directory", {})
    assert default.text.startswith(f"Contents of {W}:")
    missing = await s.call("list_directory", {"path": "nope"})
    assert not missing.ok and missing.text == f"Not a directory: {W}/nope"


async def test_bash(s: Session) -> None:
    """003 bash: stdout + stderr and the exit code; timeout in seconds."""
    r = await s.call("bash", {"command": "echo out; echo err >&2; exit 2"})
    assert r.text == "out\n\nSTDERR:\nerr\n\nExit code: 2"
    quiet = await s.call("bash", {"command": "true"})
    assert quiet.text == "(no output)"
    slow = await s.call("bash", {"command": "sleep 5", "timeout": 1})
    assert not slow.ok and slow.text == "Error: command timed out after 1s"


async def test_grep(s: Session) -> None:
    """003 grep: Python re, case-insensitive by default, include_pattern, max_results,
    path:line:content lines."""
    await sh(s, f"mkdir -p {W}/g/src && printf 'def Foo():\\n    foo_bar = 1\\n' > {W}/g/src/m.py && "
                f"printf 'foo in text\\n' > {W}/g/notes.txt")
    await s.call("bash", {"command": f"cd {W}/g"})
    r = await s.call("grep", {"regex": r"foo(?=_bar)"})
    assert r.ok and r.text == "Found 1 match:\nsrc/m.py:2:    foo_bar = 1"
    insensitive = await s.call("grep", {"regex": "foo"})
    assert insensitive.text.split("\n")[1:] == ["notes.txt:1:foo in text", "src/m.py:1:def Foo():",
                                                "src/m.py:2:    foo_bar = 1"]
    sensitive = await s.call("grep", {"regex": "Foo", "case_sensitive": True})
    assert sensitive.text == "Found 1 match:\nsrc/m.py:1:def Foo():"
    only_py = await s.call("grep", {"regex": "foo", "include_pattern": "*.py", "max_results": 1})
    assert only_py.text == "Found 2 matches (showing first 1):\nsrc/m.py:1:def Foo():"
    bad = await s.call("grep", {"regex": "(unclosed"})
    assert not bad.ok and bad.text.startswith("Invalid regex:")
    none = await s.call("grep", {"regex": "nothing-matches-this"})
    assert none.ok and none.text == "No matches found."


async def test_grep_and_find_files_skip_directories(s: Session) -> None:
    """003 "Skipped directories": .git, node_modules, dist, build, *.egg-info and any directory
    starting with "."; grep also skips files larger than 2 MB."""
    await sh(s, f"mkdir -p {W}/k && cd {W}/k && for d in .git node_modules dist build x.egg-info .cache venv; do "
                "mkdir -p $d && echo needle > $d/f.py; done && echo needle > keep.py && "
                "(echo needle; head -c 2100000 /dev/zero | tr '\\0' a) > big.py")
    await s.call("bash", {"command": f"cd {W}/k"})
    r = await s.call("grep", {"regex": "needle"})
    assert r.text == "Found 1 match:\nkeep.py:1:needle"
    files = await s.call("find_files", {"glob_pattern": "*.py"})
    assert files.text == "Found 2 files:\nbig.py\nkeep.py"
    # "Returns file paths relative to the working directory. Applies the same
    # directory-skipping rules as grep": the structured result too (MCP's structuredContent).
    assert files.data == {"files": ["big.py", "keep.py"], "total": 2, "truncated": False}


async def test_find_files(s: Session) -> None:
    """003 find_files: glob patterns (e.g. **/*.py, *.md, src/**/*.ts) matched at any depth;
    paths relative to the working directory; max_results."""
    await sh(s, f"mkdir -p {W}/ff/src/a {W}/ff/docs && cd {W}/ff && touch src/a/x.ts src/y.ts docs/r.md top.md")
    await s.call("bash", {"command": f"cd {W}/ff"})
    md = await s.call("find_files", {"glob_pattern": "*.md"})
    assert md.text == "Found 2 files:\ndocs/r.md\ntop.md"
    ts = await s.call("find_files", {"glob_pattern": "src/**/*.ts"})
    assert ts.text == "Found 2 files:\nsrc/a/x.ts\nsrc/y.ts"
    capped = await s.call("find_files", {"glob_pattern": "**/*", "max_results": 1})
    assert capped.text == "Found 4 files (showing first 1):\ndocs/r.md"
    none = await s.call("find_files", {"glob_pattern": "*.rs"})
    assert none.text == "No files matching '*.rs' found."
