"""Seed 000 (Agent Air), "File Operations" and "Directory Operations": every example call.

The seed's example paths live under /home/user/project; here they live under
/workspace/project (the session's workspace), everything else as written.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from caisson import Runtime, Session
from tests.conformance.conftest import profile_session, sh

pytestmark = pytest.mark.anyio
P = "/workspace/project"


@pytest.fixture(scope="module")
async def s(rt: Runtime, engine: str) -> AsyncIterator[Session]:
    async with profile_session(rt, "agent-air", engine) as session:
        await sh(
            session,
            f"mkdir -p {P}/src && printf 'fn main() {{\\n    println!(\"hi\");\\n}}\\n' > {P}/src/main.rs && "
            f"seq 1 150 > {P}/src/long.txt && printf 'PK\\003\\004\\000\\000binary' > {P}/data.zip",
        )
        yield session


async def test_read_file_example(s: Session) -> None:
    """000 read_file, Example: {"file_path": ..., "offset": 0, "limit": 100}; 1-based line numbers,
    the total line count, and "(End of file)" when the whole file was read."""
    r = await s.call("read_file", {"file_path": f"{P}/src/main.rs", "offset": 0, "limit": 100})
    assert r.ok, r.text
    assert "00001| fn main() {" in r.text
    assert "00003| }" in r.text
    assert "(End of file - 3 total lines)" in r.text


async def test_read_file_pagination_note(s: Session) -> None:
    """000 read_file: "If more content exists beyond the read limit, you'll see
    "Use 'offset' parameter to read beyond line N"."""
    r = await s.call("read_file", {"file_path": f"{P}/src/long.txt", "offset": 10, "limit": 20})
    assert r.ok
    assert "00011| 11" in r.text and "00030| 30" in r.text and "00031|" not in r.text
    assert "Use 'offset' parameter to read beyond line 30" in r.text
    assert "150 total lines" in r.text


async def test_read_file_refusals(s: Session) -> None:
    """000 read_file: relative paths rejected; a directory points to ls; binary files rejected
    with the format limitation explained; a missing file suggests similar files."""
    relative = await s.call("read_file", {"file_path": "src/main.rs"})
    assert not relative.ok and "absolute" in relative.text
    directory = await s.call("read_file", {"file_path": f"{P}/src"})
    assert not directory.ok and "Use ls" in directory.text
    binary = await s.call("read_file", {"file_path": f"{P}/data.zip"})
    assert not binary.ok and binary.error is not None and binary.error.code == "binary_file"
    assert "binary" in binary.text
    missing = await s.call("read_file", {"file_path": f"{P}/src/mian.rs"})
    assert not missing.ok and f"{P}/src/main.rs" in missing.text


async def test_write_file_example(s: Session) -> None:
    """000 write_file, Example: config.yaml with create_directories true; Create vs Overwrite,
    and the exact number of bytes written."""
    args = {"file_path": f"{P}/conf/config.yaml", "content": "database:\n host: localhost\n port: 5432",
            "create_directories": True}
    first = await s.call("write_file", args)
    assert first.ok and "created" in first.text and f"({len(args['content'])} bytes)" in first.text
    second = await s.call("write_file", args)
    assert second.ok and "overwrote" in second.text
    assert await sh(s, f"cat {P}/conf/config.yaml") == args["content"]
    relative = await s.call("write_file", {"file_path": "x.txt", "content": ""})
    assert not relative.ok and "absolute" in relative.text


async def test_edit_file_example(s: Session) -> None:
    """000 edit_file, Example: fn old_function( -> fn new_function(, replace_all false: only the
    first occurrence is replaced."""
    await sh(s, f"printf 'fn old_function() {{}}\\nfn other() {{ old_function(); }}\\n"
                f"fn old_function(x) {{}}\\n' > {P}/src/lib.rs")
    r = await s.call("edit_file", {"file_path": f"{P}/src/lib.rs", "old_string": "fn old_function(",
                                   "new_string": "fn new_function(", "replace_all": False})
    assert r.ok, r.text
    assert await sh(s, f"cat {P}/src/lib.rs") == (
        "fn new_function() {}\nfn other() { old_function(); }\nfn old_function(x) {}\n"
    )
    every = await s.call("edit_file", {"file_path": f"{P}/src/lib.rs", "old_string": "old_function",
                                       "new_string": "f", "replace_all": True})
    assert every.ok and "2 replacement(s)" in every.text


async def test_edit_file_matching_stages(s: Session) -> None:
    """000 edit_file: whitespace-normalised then Levenshtein matching only with fuzzy_match;
    the similarity percentage is reported; a miss quotes the first 50 characters searched;
    identical strings are rejected."""
    await sh(s, f"printf 'def f(a,  b):\\n    return a+b\\n' > {P}/fuzzy.py")
    exact_only = await s.call("edit_file", {"file_path": f"{P}/fuzzy.py", "old_string": "def f(a, b):",
                                            "new_string": "def g(a, b):"})
    assert not exact_only.ok and "def f(a, b):" in exact_only.text
    normalised = await s.call("edit_file", {"file_path": f"{P}/fuzzy.py", "old_string": "def f(a, b):",
                                            "new_string": "def g(a, b):", "fuzzy_match": True})
    assert normalised.ok and "similarity: 95.0%" in normalised.text
    fuzzy = await s.call("edit_file", {"file_path": f"{P}/fuzzy.py", "old_string": "    return a+c",
                                       "new_string": "    return a*b", "fuzzy_match": True, "fuzzy_threshold": 0.8})
    assert fuzzy.ok and "Fuzzy" in fuzzy.text and "similarity" in fuzzy.text
    long = "x" * 80
    miss = await s.call("edit_file", {"file_path": f"{P}/fuzzy.py", "old_string": long, "new_string": "y"})
    assert not miss.ok and "x" * 50 in miss.text and "x" * 51 not in miss.text
    same = await s.call("edit_file", {"file_path": f"{P}/fuzzy.py", "old_string": "a", "new_string": "a"})
    assert not same.ok and "identical" in same.text


async def test_multi_edit_example(s: Session) -> None:
    """000 multi_edit, Example: use old_crate; / old_crate::init() replaced atomically."""
    await sh(s, f"printf 'use old_crate;\\nfn main() {{ old_crate::init() }}\\n' > {P}/src/multi.rs")
    r = await s.call("multi_edit", {"file_path": f"{P}/src/multi.rs", "edits": [
        {"old_string": "use old_crate;", "new_string": "use new_crate;"},
        {"old_string": "old_crate::init()", "new_string": "new_crate::init()"},
    ]})
    assert r.ok, r.text
    assert await sh(s, f"cat {P}/src/multi.rs") == "use new_crate;\nfn main() { new_crate::init() }\n"


async def test_multi_edit_atomic_overlap_limit_dry_run(s: Session) -> None:
    """000 multi_edit: a failing edit leaves the file unchanged; overlapping edits are rejected;
    at most 50 edits; dry run reports edits, fuzzy matches and the byte size difference."""
    await sh(s, f"printf 'alpha beta gamma\\n' > {P}/atomic.txt")
    failing = await s.call("multi_edit", {"file_path": f"{P}/atomic.txt", "edits": [
        {"old_string": "alpha", "new_string": "A"}, {"old_string": "missing", "new_string": "M"}]})
    assert not failing.ok
    assert await sh(s, f"cat {P}/atomic.txt") == "alpha beta gamma\n"
    overlap = await s.call("multi_edit", {"file_path": f"{P}/atomic.txt", "edits": [
        {"old_string": "alpha beta", "new_string": "X"}, {"old_string": "beta gamma", "new_string": "Y"}]})
    assert not overlap.ok and "overlap" in overlap.text
    too_many = await s.call("multi_edit", {"file_path": f"{P}/atomic.txt",
                                           "edits": [{"old_string": "a", "new_string": "b"}] * 51})
    assert not too_many.ok and too_many.error is not None and too_many.error.code == "invalid_arguments"
    dry = await s.call("multi_edit", {"file_path": f"{P}/atomic.txt", "dry_run": True, "edits": [
        {"old_string": "alpha", "new_string": "alphabet"}]})
    assert dry.ok and "1 edit(s) would be applied" in dry.text and "Delta: 3 bytes" in dry.text
    assert await sh(s, f"cat {P}/atomic.txt") == "alpha beta gamma\n"


async def test_ls_example(s: Session) -> None:
    """000 ls, Example: long_format, pattern *.rs, sort_by modified; Unix permissions, human
    sizes, trailing / on directories, hidden files excluded by default, a file points to read_file."""
    r = await s.call("ls", {"path": f"{P}/src", "long_format": True, "pattern": "*.rs", "sort_by": "modified"})
    assert r.ok, r.text
    assert "main.rs" in r.text and "long.txt" not in r.text
    assert "-rw-r--r--" in r.text
    await sh(s, f"touch {P}/.hidden")
    plain = await s.call("ls", {"path": P})
    assert "src/" in plain.text.split("\n") and ".hidden" not in plain.text
    hidden = await s.call("ls", {"path": P, "include_hidden": True})
    assert ".hidden" in hidden.text
    on_file = await s.call("ls", {"path": f"{P}/src/main.rs"})
    assert not on_file.ok and "read_file" in on_file.text


async def test_ls_limit_note(s: Session) -> None:
    """000 ls: "Results are limited to 1000 entries ... '... and N more entries'"."""
    await sh(s, "mkdir -p /workspace/many && cd /workspace/many && touch f{0001..1004}")
    r = await s.call("ls", {"path": "/workspace/many"})
    assert r.ok and "... and 4 more entries" in r.text


async def test_glob_example(s: Session) -> None:
    """000 glob, Example: {"pattern": "**/*.rs", "path": ..., "limit": 50}; absolute paths,
    newest first, "... and N more files", a clear message when nothing matches."""
    await sh(s, f"sleep 1 && touch {P}/src/newest.rs")
    r = await s.call("glob", {"pattern": "**/*.rs", "path": P, "limit": 50})
    assert r.ok
    files = r.text.split("\n")
    assert files[0] == f"{P}/src/newest.rs"
    assert f"{P}/src/main.rs" in files
    limited = await s.call("glob", {"pattern": "**/*.rs", "path": P, "limit": 1})
    assert "... and" in limited.text and "more files" in limited.text
    none = await s.call("glob", {"pattern": "**/*.nothing", "path": P})
    assert none.ok and "No files found matching pattern" in none.text


async def test_grep_example(s: Session) -> None:
    """000 grep, Example: {"pattern": "fn\\\\s+main", "type": "rust", "output_mode": "content", "-C": 3};
    filename, line number and line; files_with_matches by default; count mode; -i."""
    r = await s.call("grep", {"pattern": "fn\\s+main", "path": P, "type": "rust", "output_mode": "content",
                              "-C": 3})
    assert r.ok, r.text
    assert f"{P}/src/main.rs:1: fn main() {{" in r.text
    assert f"{P}/src/main.rs-2-" in r.text
    files = await s.call("grep", {"pattern": "println", "path": P})
    assert files.text.strip() == f"{P}/src/main.rs"
    count = await s.call("grep", {"pattern": "FN", "path": P, "type": "rust", "output_mode": "count", "-i": True})
    assert f"{P}/src/main.rs:1" in count.text
    no_numbers = await s.call("grep", {"pattern": "println", "path": P, "output_mode": "content", "-n": False})
    assert f"{P}/src/main.rs: " in no_numbers.text and ":2:" not in no_numbers.text


async def test_ls_long_format_sizes_in_kb_mb_gb(s: Session) -> None:
    """000 ls: "In long format mode, each entry shows Unix-style permissions, human-readable
    file size (KB/MB/GB), modification timestamp, and the filename." """
    await sh(s, f"mkdir -p {P}/sizes && head -c 3000 /dev/zero > {P}/sizes/k.bin && head -c 3145728 /dev/zero > {P}/sizes/m.bin")
    r = await s.call("ls", {"path": f"{P}/sizes", "long_format": True})
    assert r.ok, r.text
    assert "2.9KB" in r.text and "3.0MB" in r.text


async def test_glob_ignores_gitignore(s: Session) -> None:
    """000 glob: "Hidden files and directories (those starting with ".") are excluded by
    default" and symbolic links are skipped; .gitignore is not among its rules."""
    await sh(s, f"mkdir -p {P}/g/build && printf 'build/\\n' > {P}/g/.gitignore && touch {P}/g/build/out.rs {P}/g/a.rs")
    r = await s.call("glob", {"pattern": "**/*.rs", "path": f"{P}/g"})
    assert r.ok, r.text
    assert f"{P}/g/build/out.rs" in r.text and f"{P}/g/a.rs" in r.text
