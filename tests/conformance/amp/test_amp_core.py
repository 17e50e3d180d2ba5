"""Seed 001 (Amp core tools): every output format, error response, behaviour-contract item
and pattern example of the essential six, in a real `amp` session."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator

import anyio
import pytest

from caisson import Runtime, Session
from tests.conformance.conftest import profile_session, sh

pytestmark = pytest.mark.anyio
W = "/workspace"
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


@pytest.fixture(scope="module")
async def s(rt: Runtime, engine: str) -> AsyncIterator[Session]:
    async with profile_session(rt, "amp", engine) as session:
        await sh(session, f"mkdir -p {W}/read/sub && printf 'first line\\nsecond line\\nthird...\\n' > {W}/read/f.txt")
        await session.write_file(f"{W}/read/pixel.png", PNG, owner="agent")
        yield session


def envelope(r: object) -> dict:
    return r.data  # type: ignore[attr-defined, no-any-return]


# ---- Read ----------------------------------------------------------------------------------------


async def test_read_file_format(s: Session) -> None:
    """001 Read, Output Formats / For files: "1: first line of content"."""
    r = await s.call("Read", {"path": f"{W}/read/f.txt"})
    assert r.ok
    assert envelope(r) == {"status": "done", "result": "1: first line\n2: second line\n3: third..."}
    assert r.text == "1: first line\n2: second line\n3: third..."


async def test_read_range_default_and_cap(s: Session) -> None:
    """001 Read: read_range [start, end] 1-indexed, default [1, 500], hard cap 2,000 lines;
    relative paths resolve against the working directory."""
    await sh(s, f"seq 1 2500 > {W}/read/long.txt")
    default = await s.call("Read", {"path": f"{W}/read/long.txt"})
    lines = default.text.split("\n")
    assert len(lines) == 500 and lines[0] == "1: 1" and lines[-1] == "500: 500"
    ranged = await s.call("Read", {"path": "read/long.txt", "read_range": [2, 3]})
    assert ranged.text == "2: 2\n3: 3"
    capped = await s.call("Read", {"path": f"{W}/read/long.txt", "read_range": [1, 5000]})
    assert len(capped.text.split("\n")) == 2000
    bad = await s.call("Read", {"path": f"{W}/read/long.txt", "read_range": [1]})
    assert not bad.ok and bad.error is not None and bad.error.code == "invalid_arguments"


async def test_read_long_lines_truncated(s: Session) -> None:
    """001 Read, Constants: MAX_BYTES_PER_LINE 4,096."""
    await sh(s, f"head -c 5000 /dev/zero | tr '\\0' a > {W}/read/wide.txt")
    r = await s.call("Read", {"path": f"{W}/read/wide.txt"})
    assert r.text.startswith("1: " + "a" * 4096) and len(r.text) < 4200


async def test_read_directory(s: Session) -> None:
    """001 Read, For directories: entries sorted, subdirectories with a / suffix."""
    r = await s.call("Read", {"path": f"{W}/read"})
    assert r.ok and envelope(r)["status"] == "done"
    assert r.text.split("\n")[:3] == ["f.txt", "long.txt", "pixel.png"] and "sub/" in r.text.split("\n")


async def test_read_image(s: Session) -> None:
    """001 Read, For images: {status: "done", result: {type: "image", media_type: "image/png", data: base64}}."""
    r = await s.call("Read", {"path": f"{W}/read/pixel.png"})
    assert envelope(r) == {
        "status": "done", "result": {"type": "image", "media_type": "image/png", "data": base64.b64encode(PNG).decode()}
    }


async def test_read_errors(s: Session) -> None:
    """001 Read, Error Responses: ENOENT (with absolutePath), secret file (errorCode
    reading-secret-file), binary file, file too large — word for word."""
    missing = await s.call("Read", {"path": f"{W}/read/none.txt"})
    assert envelope(missing) == {"status": "error", "error": {
        "message": f"ENOENT: no such file or directory '{W}/read/none.txt'", "absolutePath": f"{W}/read/none.txt"}}
    await sh(s, f"printf 'TOKEN=1\\n' > {W}/read/.env")
    secret = await s.call("Read", {"path": f"{W}/read/.env"})
    assert envelope(secret) == {"status": "error", "error": {
        "errorCode": "reading-secret-file", "message": "Refusing to read env file. Reading secrets is not permitted."}}
    await sh(s, f"printf 'a\\000b' > {W}/read/blob.dat")
    binary = await s.call("Read", {"path": f"{W}/read/blob.dat"})
    assert envelope(binary)["error"]["message"] == "File appears to be binary and cannot be displayed as text."
    await sh(s, f"head -c 70000 /dev/zero | tr '\\0' 'a' | fold -w 100 > {W}/read/big.txt")
    big = await s.call("Read", {"path": f"{W}/read/big.txt"})
    assert envelope(big)["error"]["message"] == "File content exceeds maximum allowed size (65536 bytes)"
    assert not (missing.ok or secret.ok or binary.ok or big.ok)


# ---- edit_file, create_file ----------------------------------------------------------------------


async def test_edit_file_success_output(s: Session) -> None:
    """001 edit_file, Success Output: {status: "done", result: {diff, lineRange}, trackFiles: [path]}."""
    await sh(s, f"mkdir -p {W}/edit && printf 'a = 1\\nb = 2\\nc = 3\\n' > {W}/edit/x.py")
    r = await s.call("edit_file", {"path": f"{W}/edit/x.py", "old_str": "b = 2", "new_str": "b = 20"})
    assert r.ok
    result = envelope(r)
    assert result["status"] == "done" and result["trackFiles"] == [f"{W}/edit/x.py"]
    assert result["result"]["lineRange"] == [2, 2]
    assert "-b = 2\n+b = 20" in result["result"]["diff"]
    assert await sh(s, f"cat {W}/edit/x.py") == "a = 1\nb = 20\nc = 3\n"


async def test_edit_file_errors(s: Session) -> None:
    """001 edit_file, Error Responses, word for word."""
    await sh(s, f"mkdir -p {W}/edit && printf 'x\\nx\\n' > {W}/edit/dup.txt")
    cases = [
        ({"path": f"{W}/edit/none.txt", "old_str": "a", "new_str": "b"},
         "file not found. Cannot update a file that doesn't exist."),
        ({"path": f"{W}/edit/dup.txt", "old_str": "zzz", "new_str": "b"}, "Could not find exact match for old_str"),
        ({"path": f"{W}/edit/dup.txt", "old_str": "x", "new_str": "y"},
         "found multiple matches for edit (2 occurrences). Use replace_all or provide more context."),
        ({"path": f"{W}/edit/dup.txt", "old_str": "x", "new_str": "x"}, "old_str and new_str must be different"),
    ]
    for args, message in cases:
        r = await s.call("edit_file", args)
        assert envelope(r) == {"status": "error", "error": {"message": message}}, args


async def test_edit_file_replace_all_fuzzy_whitespace_and_alias(s: Session) -> None:
    """001 edit_file, Behavior Contract 5 and 6: replace_all; fuzzy whitespace matching when the
    exact match fails; the Edit alias (Note on naming)."""
    await sh(s, f"mkdir -p {W}/edit && printf 'x\\nx\\nif  a:\\n\\treturn 1\\n' > {W}/edit/all.py")
    every = await s.call("Edit", {"path": f"{W}/edit/all.py", "old_str": "x", "new_str": "y", "replace_all": True})
    assert every.ok
    fuzzy = await s.call("edit_file", {"path": f"{W}/edit/all.py", "old_str": "if a:\n    return 1",
                                       "new_str": "if a:\n    return 2"})
    assert fuzzy.ok, fuzzy.text
    assert await sh(s, f"cat {W}/edit/all.py") == "y\ny\nif a:\n\treturn 2\n"


async def test_create_file(s: Session) -> None:
    """001 create_file, Behavior Contract 1-3 and Implementation: parent directories created, a
    trailing newline appended, overwrites; "Successfully created/overwrote file <path>"; the
    Write alias."""
    path = f"{W}/create/deep/new.txt"
    first = await s.call("create_file", {"path": path, "content": "hello"})
    assert envelope(first) == {"status": "done", "result": f"Successfully created file {path}", "trackFiles": [path]}
    assert await sh(s, f"cat {path}") == "hello\n"
    again = await s.call("Write", {"path": path, "content": "bye\n"})
    assert envelope(again)["result"] == f"Successfully overwrote file {path}"
    assert await sh(s, f"cat {path}") == "bye\n"


async def test_create_file_discovers_guidance(s: Session) -> None:
    """001 create_file, Behavior Contract 5: "Checks for AGENTS.md discovery after creation"
    -> result {message, discoveredGuidanceFiles}; a file already reported is not reported again."""
    await sh(s, f"mkdir -p {W}/pkg/mod && printf '# rules\\n' > {W}/pkg/AGENTS.md")
    r = await s.call("create_file", {"path": f"{W}/pkg/mod/a.py", "content": "x = 1\n"})
    assert envelope(r)["result"] == {
        "message": f"Successfully created file {W}/pkg/mod/a.py", "discoveredGuidanceFiles": [f"{W}/pkg/AGENTS.md"]}
    again = await s.call("create_file", {"path": f"{W}/pkg/mod/b.py", "content": "x = 2\n"})
    assert envelope(again)["result"] == f"Successfully created file {W}/pkg/mod/b.py"


# ---- Bash ----------------------------------------------------------------------------------------


async def test_bash_xml_output(s: Session) -> None:
    """001 Bash, Output Format (XML): <command>, <working_directory>, <output>, <exit_code>."""
    r = await s.call("Bash", {"cmd": "echo hi"})
    assert r.text == (
        f"<command>echo hi</command>\n<working_directory>{W}</working_directory>\n"
        "<output>hi\n</output>\n<exit_code>0</exit_code>"
    )
    assert envelope(r) == {"status": "done", "result": r.text}


async def test_bash_no_state_between_calls(s: Session) -> None:
    """001 Bash, Behavior Contract 3 and 4: environment variables and cd do NOT persist."""
    await s.call("Bash", {"cmd": "export AMP_VAR=1; cd /tmp"})
    r = await s.call("Bash", {"cmd": "echo \"[$AMP_VAR]\"; pwd"})
    assert f"<output>[]\n{W}\n</output>" in r.text


async def test_bash_preprocessing(s: Session) -> None:
    """001 Bash, Preprocessing: a trailing & is removed; `cd dir && cmd` becomes cwd: dir + cmd;
    the cwd parameter sets the working directory."""
    await sh(s, f"mkdir -p {W}/bashdir")
    background = await s.call("Bash", {"cmd": "echo done &"})
    assert "<command>echo done</command>" in background.text and "<output>done\n</output>" in background.text
    cd = await s.call("Bash", {"cmd": "cd bashdir && pwd"})
    assert "<command>pwd</command>" in cd.text
    assert f"<working_directory>{W}/bashdir</working_directory>" in cd.text
    assert f"<output>{W}/bashdir\n</output>" in cd.text
    cwd = await s.call("Bash", {"cmd": "pwd", "cwd": f"{W}/bashdir"})
    assert f"<output>{W}/bashdir\n</output>" in cwd.text


async def test_bash_exit_codes_are_not_errors(s: Session) -> None:
    """001 Bash, Behavior Contract 7: non-zero exit codes are informational; stderr is part of the output."""
    r = await s.call("Bash", {"cmd": "echo out; echo err >&2; exit 3"})
    assert r.ok and envelope(r)["status"] == "done"
    assert "<output>out\nerr\n</output>\n<exit_code>3</exit_code>" in r.text


async def test_bash_output_keeps_last_50000_chars(s: Session) -> None:
    """001 Bash, Constants: MAX_OUTPUT_CHARS 50,000; "Output truncated to last 50,000 characters"."""
    r = await s.call("Bash", {"cmd": "head -c 60000 /dev/zero | tr '\\0' a; printf END"})
    output = r.text.split("<output>", 1)[1].split("</output>", 1)[0]
    assert len(output) == 50000 and output.endswith("END")


# ---- glob, Grep ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
async def tree(s: Session) -> str:
    root = f"{W}/tree"
    await sh(
        s,
        f"mkdir -p {root}/src/core {root}/src/Upper {root}/lib {root}/ignored && cd {root} && "
        "touch a.json b.js c.ts src/x.ts src/core/y.ts src/Upper/z.ts lib/my_test.py lib/other.py ignored/i.ts && "
        "printf 'ignored/\\n' > .gitignore",
    )
    return root


async def test_glob_pattern_syntax(s: Session, tree: str) -> None:
    """001 glob, Pattern Syntax table: each example pattern; .gitignore respected; absolute paths."""
    expected = {
        "**/*.js": ["b.js"],
        "src/**/*.ts": ["src/core/y.ts", "src/Upper/z.ts", "src/x.ts"],
        "*.json": ["a.json"],
        "**/*test*": ["lib/my_test.py"],
        "**/*.{js,ts}": ["b.js", "c.ts", "src/core/y.ts", "src/Upper/z.ts", "src/x.ts"],
        "src/[a-z]*/*.ts": ["src/core/y.ts"],
    }
    # Patterns are relative to the working directory (the workspace); the tree is in tree/.
    for pattern, files in expected.items():
        got = await s.call("glob", {"filePattern": "tree/" + pattern})
        assert sorted(got.data["result"]["files"]) == sorted(f"{tree}/{f}" for f in files), pattern
        assert got.data["result"]["remaining"] == 0


async def test_glob_pagination(s: Session, tree: str) -> None:
    """001 glob, Success Output: {files, remaining}; limit and offset paginate."""
    first = await s.call("glob", {"filePattern": "tree/**/*.ts", "limit": 2})
    assert envelope(first)["status"] == "done"
    assert len(first.data["result"]["files"]) == 2 and first.data["result"]["remaining"] == 2
    rest = await s.call("glob", {"filePattern": "tree/**/*.ts", "limit": 2, "offset": 2})
    assert rest.data["result"]["remaining"] == 0
    assert set(first.data["result"]["files"]).isdisjoint(rest.data["result"]["files"])
    extra = await s.call("glob", {"filePattern": "*", "other": 1})
    assert not extra.ok  # additionalProperties: false


async def test_grep_output_and_case(s: Session) -> None:
    """001 Grep, Success Output: ["path/file.ts:42: matching line content"]; case-insensitive by
    default; caseSensitive; literal."""
    await sh(s, f"mkdir -p {W}/g && printf 'Hello World\\nhello world\\nfoo(bar)\\n' > {W}/g/a.ts")
    r = await s.call("Grep", {"pattern": "HELLO", "path": "g"})
    assert envelope(r) == {"status": "done", "result": ["g/a.ts:1: Hello World", "g/a.ts:2: hello world"]}
    sensitive = await s.call("Grep", {"pattern": "Hello", "path": "g", "caseSensitive": True})
    assert sensitive.data["result"] == ["g/a.ts:1: Hello World"]
    literal = await s.call("Grep", {"pattern": "foo(bar)", "path": f"{W}/g", "literal": True})
    assert literal.data["result"] == [f"{W}/g/a.ts:3: foo(bar)"]
    with_glob = await s.call("Grep", {"pattern": "world", "glob": "*.ts"})
    assert "g/a.ts:1: Hello World" in with_glob.data["result"]


async def test_grep_no_results_is_not_an_error(s: Session) -> None:
    """001 Grep, No Results (NOT an error)."""
    r = await s.call("Grep", {"pattern": "no-such-text-anywhere", "path": "g"})
    assert r.ok and envelope(r) == {"status": "done", "result": [
        "No results found.", "If you meant to search for a literal string, run Grep again with literal:true."]}


async def test_grep_limits(s: Session) -> None:
    """001 Grep, Constants: 10 matches per file, 100 in total, lines truncated at 200 characters."""
    await sh(s, f"mkdir -p {W}/gl && cd {W}/gl && for i in $(seq 1 15); do seq 1 20 | sed 's/^/hit /' > f$i.txt; done "
                f"&& head -c 300 /dev/zero | tr '\\0' y | sed 's/^/hit /' > wide.txt")
    r = await s.call("Grep", {"pattern": "hit", "path": "gl"})
    lines = r.data["result"]
    assert len(lines) == 100
    assert sum(1 for line in lines if line.startswith("gl/f1.txt:")) == 10
    wide = await s.call("Grep", {"pattern": "hit", "path": "gl/wide.txt"})
    assert len(wide.data["result"][0]) == 203 and wide.data["result"][0].endswith("...")


async def test_grep_error(s: Session) -> None:
    """001 Grep, Implementation: a failed search ->
    {status: "error", error: {message: "ripgrep exited with code 2"}}."""
    r = await s.call("Grep", {"pattern": "a{", "path": "g"})
    assert not r.ok and envelope(r)["status"] == "error"
    assert envelope(r)["error"]["message"] == "ripgrep exited with code 2"


async def test_envelope_is_json_text(s: Session) -> None:
    """001: a non-string result is the JSON of the result."""
    r = await s.call("glob", {"filePattern": "g/*.ts"})
    assert json.loads(r.text) == r.data["result"]


async def test_bash_runs_serially(s: Session) -> None:
    """001 Bash, Behavior Contract 5: "Runs serially (not in parallel)"."""
    spans: list[tuple[float, float]] = []

    async def run() -> None:
        r = await s.call("Bash", {"cmd": "date +%s.%N; sleep 0.5; date +%s.%N"})
        start, end = r.text.split("<output>", 1)[1].split("</output>", 1)[0].split()
        spans.append((float(start), float(end)))

    async with anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(run)
    spans.sort()
    assert all(earlier[1] <= later[0] for earlier, later in zip(spans, spans[1:], strict=False))
