"""ls, glob and grep against real sessions, including grep/glob parity between ripgrep and
the pure-Python engine on a generated tree, and an image without ripgrep."""

from __future__ import annotations

import io
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from toolcall import call

from caisson import Runtime, Session
from caisson.bench.file_tools import make_tree
from caisson.docker.images import resolve_base
from caisson.tools.search.grep import GrepInput, run_search
from caisson.tools.search.listing import GlobInput, find_files, name_globs

pytestmark = pytest.mark.anyio


SMALL_TREE = {
    ".gitignore": "build/\n*.log\n!keep.log\n",
    "a.py": "import os\nprint('Hello World')\n",
    "b.rs": 'fn main() {\n    println!("hello");\n}\n',
    "src/main.rs": "fn main() {}\n// TODO: hello later\n",
    "src/lib/x.rs": "pub fn x() -> u8 { 1 }\n",
    "src/.gitignore": "gen.rs\n",
    "src/gen.rs": "generated hello\n",
    "src/keep.log": "hello kept\n",
    "src/app.log": "hello ignored\n",
    "build/z.rs": "hello in build\n",
    ".hidden/y.rs": "hello hidden\n",
    ".h.rs": "hello dotfile\n",
    "docs/guide.md": "# Guide\nSay hello.\n",
}


@pytest.fixture(scope="module")
async def tree(shared_session: Session) -> AsyncIterator[str]:
    root = f"/workspace/s-{uuid.uuid4().hex[:8]}"
    for rel, content in SMALL_TREE.items():
        await shared_session.write_file(f"{root}/{rel}", content)
    await shared_session.write_file(f"{root}/bin.dat", b"hello\x00binary")
    await shared_session.exec(["ln", "-s", "b.rs", f"{root}/link.rs"])
    # Distinct modification times, newest last in this list.
    for age, rel in enumerate(reversed(["a.py", "b.rs", "src/main.rs", "src/lib/x.rs", "docs/guide.md"])):
        await shared_session.exec(["touch", "-d", f"@{1_700_000_000 - age * 60}", f"{root}/{rel}"])
    yield root


# ---- ls ------------------------------------------------------------------------------------


async def test_ls_sorts_directories_first_and_hides_dotfiles(shared_session: Session, tree: str) -> None:
    r = await call(shared_session, "ls", path=tree)
    assert r.text == "build/\ndocs/\nsrc/\na.py\nb.rs\nbin.dat\nlink.rs"
    hidden = await call(shared_session, "ls", path=tree, include_hidden=True, directories_first=False, reverse=True)
    assert hidden.text.splitlines()[:3] == ["src/", "link.rs", "docs/"]
    assert ".gitignore" in hidden.text and ".hidden/" in hidden.text


async def test_ls_long_format_pattern_and_limit(shared_session: Session, tree: str) -> None:
    r = await call(shared_session, "ls", path=tree, long_format=True, pattern="*.rs")
    lines = r.text.splitlines()
    assert lines[0].startswith("-rw-r--r--") and lines[0].endswith(" b.rs")
    assert "37B" in lines[0] and "Nov 14 22:" in lines[0]
    assert lines[1].startswith("lrwxrwxrwx") and lines[1].endswith("link.rs -> b.rs")
    by_size = await call(shared_session, "ls", path=tree, sort_by="size", limit=2)
    assert by_size.text.endswith("\n\n... and 5 more entries (showing 2/7)") and by_size.truncated
    file = await call(shared_session, "ls", path=f"{tree}/a.py")
    assert file.error.code == "not_a_directory" and "read_file" in file.text


# ---- glob ----------------------------------------------------------------------------------


async def test_glob_newest_first_respecting_gitignore(shared_session: Session, tree: str) -> None:
    r = await call(shared_session, "glob", pattern="**/*.rs", path=tree)
    assert r.text.splitlines() == [f"{tree}/{p}" for p in ("src/lib/x.rs", "src/main.rs", "b.rs")]
    hidden = await call(shared_session, "glob", pattern="**/*.rs", path=tree, include_hidden=True, sort_by="path")
    assert [p[len(tree) + 1 :] for p in hidden.data["files"]] == [
        ".h.rs",
        ".hidden/y.rs",
        "b.rs",
        "src/lib/x.rs",
        "src/main.rs",
    ]
    unignored = await call(
        shared_session, "glob", pattern="**/*.{rs,log}", path=tree, respect_gitignore=False, sort_by="path"
    )
    assert "build/z.rs" in str(unignored.data["files"]) and "src/gen.rs" in str(unignored.data["files"])


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("*.py", ["a.py"]),
        ("*", ["a.py", "b.rs", "bin.dat"]),
        ("src/*.rs", ["src/main.rs"]),
        ("src/**", ["src/keep.log", "src/lib/x.rs", "src/main.rs"]),
        ("?.rs", ["b.rs"]),
        ("[ab].*", ["a.py", "b.rs"]),
        ("[!a].*", ["b.rs"]),
        ("**/*.{md,py}", ["a.py", "docs/guide.md"]),
    ],
)
async def test_glob_pattern_syntax(shared_session: Session, tree: str, pattern: str, expected: list[str]) -> None:
    r = await call(shared_session, "glob", pattern=pattern, path=tree, sort_by="path")
    assert [p[len(tree) + 1 :] for p in r.data["files"]] == expected


async def test_glob_pagination_and_no_match(shared_session: Session, tree: str) -> None:
    page = await call(shared_session, "glob", pattern="**/*", path=tree, limit=2, offset=1, sort_by="path")
    assert [p[len(tree) + 1 :] for p in page.data["files"]] == ["b.rs", "bin.dat"]
    assert page.data["total"] == 7 and page.data["remaining"] == 4
    assert page.text.endswith("\n\n... and 4 more files (showing 2/7)")
    none = await call(shared_session, "glob", pattern="*.zig", path=tree)
    assert none.ok and none.text == f"No files found matching pattern '*.zig' in '{tree}'"


# ---- grep ----------------------------------------------------------------------------------


async def test_grep_modes(shared_session: Session, tree: str) -> None:
    files = await call(shared_session, "grep", pattern="hello", path=tree)
    assert files.text.splitlines() == [f"{tree}/{p}" for p in ("b.rs", "docs/guide.md", "src/keep.log", "src/main.rs")]
    content = await call(shared_session, "grep", pattern="hel+o", path=tree, output_mode="content")
    assert content.text.splitlines() == [
        f'{tree}/b.rs:2:     println!("hello");',
        f"{tree}/docs/guide.md:2: Say hello.",
        f"{tree}/src/keep.log:1: hello kept",
        f"{tree}/src/main.rs:2: // TODO: hello later",
    ]
    assert content.data["matches"][0] == {
        "path": f"{tree}/b.rs",
        "line": 2,
        "column": 15,
        "text": '    println!("hello");',
        "context_before": [],
        "context_after": [],
    }
    count = await call(shared_session, "grep", pattern="l", path=tree, output_mode="count", type="rust")
    # As with ripgrep's --type, a file of the requested type is searched even if hidden.
    assert count.text.splitlines() == [f"{tree}/.h.rs:1", f"{tree}/b.rs:1", f"{tree}/src/main.rs:1"]


async def test_grep_case_literal_glob_and_type(shared_session: Session, tree: str) -> None:
    insensitive = await call(shared_session, "grep", pattern="HELLO world", path=tree, ignore_case=True)
    assert insensitive.text == f"{tree}/a.py"
    literal = await call(shared_session, "grep", pattern="print('", path=tree, literal=True)
    assert literal.text == f"{tree}/a.py"
    # "\!" is not an escape ripgrep knows: it is taken as "!" by both engines.
    escaped = await call(shared_session, "grep", pattern=r"println\!\(", path=tree)
    assert escaped.text == f"{tree}/b.rs"
    by_glob = await call(shared_session, "grep", pattern="fn", path=tree, glob="src/**/*.rs")
    assert by_glob.text.splitlines() == [f"{tree}/src/lib/x.rs", f"{tree}/src/main.rs"]
    by_type = await call(shared_session, "grep", pattern="hello", path=tree, type="markdown", ignore_case=True)
    assert by_type.text == f"{tree}/docs/guide.md"
    unknown = await call(shared_session, "grep", pattern="x", path=tree, type="cobol")
    assert unknown.error.code == "invalid_arguments" and "Known types:" in unknown.text


async def test_grep_skips_binary_hidden_and_ignored_unless_asked(shared_session: Session, tree: str) -> None:
    plain = await call(shared_session, "grep", pattern="hello", path=tree)
    for skipped in ("bin.dat", ".h.rs", ".hidden/y.rs", "build/z.rs", "src/gen.rs", "src/app.log", "link.rs"):
        assert f"{tree}/{skipped}" not in plain.text
    everything = await call(shared_session, "grep", pattern="hello", path=tree, include_hidden=True, no_ignore=True)
    for found in (".h.rs", ".hidden/y.rs", "build/z.rs", "src/gen.rs", "src/app.log"):
        assert f"{tree}/{found}" in everything.text
    assert f"{tree}/bin.dat" not in everything.text


async def test_file_with_a_late_nul_byte_is_binary_for_both_engines(shared_session: Session) -> None:
    root = f"/workspace/n-{uuid.uuid4().hex[:8]}"
    await shared_session.write_file(f"{root}/late.txt", b"hello\nhello\n" + b"a" * 70000 + b"\n\x00\n")
    await shared_session.write_file(f"{root}/ok.txt", b"hello\n")
    for mode in ("content", "count", "files_with_matches"):
        args = GrepInput(pattern="hello", path=root, output_mode=mode)
        for engine in ("rg", "python"):
            _, reply = await run_search(shared_session.tool_context(), args, engine)  # type: ignore[arg-type]
            assert ([f.path for f in reply.files] or reply.paths) == ["ok.txt"], (mode, engine)


async def test_grep_context_and_multiline(shared_session: Session, tree: str) -> None:
    r = await call(shared_session, "grep", pattern="println", path=f"{tree}/b.rs", output_mode="content", context=1)
    assert r.text.splitlines() == [
        f"{tree}/b.rs-1- fn main() {{",
        f'{tree}/b.rs:2:     println!("hello");',
        f"{tree}/b.rs-3- }}",
    ]
    assert r.data["matches"][0]["context_before"] == [[1, "fn main() {"]]
    multi = await call(
        shared_session, "grep", pattern=r"main\(\) \{\n\s+println", path=tree, multiline=True, output_mode="content"
    )
    assert multi.text.splitlines() == [f"{tree}/b.rs:1: fn main() {{", f'{tree}/b.rs:2:     println!("hello");']
    needs_flag = await call(shared_session, "grep", pattern=r"a\nb", path=tree)
    assert needs_flag.error.code == "invalid_pattern"


async def test_grep_caps_long_lines_and_no_match(shared_session: Session) -> None:
    root = f"/workspace/g-{uuid.uuid4().hex[:8]}"
    for i in range(3):
        await shared_session.write_file(f"{root}/f{i}.txt", "".join(f"hit {n} " + "x" * 300 + "\n" for n in range(5)))
    r = await call(
        shared_session,
        "grep",
        pattern="hit",
        path=root,
        output_mode="content",
        max_per_file=2,
        limit=5,
        max_line_chars=20,
    )
    assert len(r.data["matches"]) == 5 and r.truncated
    assert r.data["matches"][0]["text"] == "hit 0 " + "x" * 14 + "..."
    assert [(m["path"][-6:], m["line"]) for m in r.data["matches"]] == [
        ("f0.txt", 1),
        ("f0.txt", 2),
        ("f1.txt", 1),
        ("f1.txt", 2),
        ("f2.txt", 1),
    ]
    assert r.text.endswith("(Results truncated: 5 matches shown. Narrow the search or raise the limit.)")
    none = await call(shared_session, "grep", pattern="absent", path=root)
    assert none.ok and none.text == "No matches found" and not none.truncated
    bad = await call(shared_session, "grep", pattern="(unclosed", path=root)
    assert bad.error.code == "invalid_pattern" and bad.text.startswith("Invalid regex pattern:")
    gone = await call(shared_session, "grep", pattern="x", path=f"{root}/missing")
    assert (gone.error.code, gone.text) == ("not_found", f"Search path does not exist: {root}/missing")


# ---- ripgrep / pure-Python parity ----------------------------------------------------------

PARITY_QUERIES: list[dict[str, Any]] = [
    {"pattern": "alpha"},
    {"pattern": "alpha", "output_mode": "content"},
    {"pattern": "alpha", "output_mode": "count"},
    {"pattern": "ERROR", "ignore_case": True, "output_mode": "content", "limit": 40},
    {"pattern": r"han\w+\s+(Error|request)", "output_mode": "content", "max_per_file": 2, "limit": 60},
    {"pattern": "alpha", "glob": "*.py"},
    {"pattern": "alpha", "glob": "*.log"},
    {"pattern": "alpha", "glob": "src/**/*.{md,txt}"},
    {"pattern": "alpha", "type": "py"},
    {"pattern": "alpha", "type": "py", "glob": "src/**"},
    {"pattern": "alpha", "include_hidden": True},
    {"pattern": "alpha", "no_ignore": True, "output_mode": "count"},
    {"pattern": "alpha.beta", "multiline": True, "output_mode": "content"},
    {"pattern": r"gamma\n\w+", "multiline": True, "output_mode": "count"},
    {"pattern": "three$", "output_mode": "content"},
    {"pattern": "日本語", "output_mode": "content", "limit": 25},
    {"pattern": "omega", "output_mode": "content", "context": 2, "limit": 30, "max_line_chars": 40},
    {"pattern": "résumé", "literal": True, "output_mode": "count"},
    {"pattern": "^alpha", "output_mode": "content", "limit": 15},
    {"pattern": r"alpha\ \w+\,?", "output_mode": "count"},
    {"pattern": "alpha", "path": "src", "output_mode": "content", "limit": 50},
    {"pattern": "alpha", "path": "crlf.txt", "output_mode": "content"},
]


@pytest.fixture(scope="module")
async def generated(shared_session: Session) -> str:
    root = f"/workspace/parity-{uuid.uuid4().hex[:8]}"
    await make_tree(shared_session, root, files=1200, seed=11)
    return root


@pytest.mark.parametrize("query", PARITY_QUERIES, ids=lambda q: "-".join(f"{k}={v}" for k, v in q.items()))
async def test_grep_gives_identical_results_with_and_without_ripgrep(
    shared_session: Session, generated: str, query: dict[str, Any]
) -> None:
    args = GrepInput.model_validate({**query, "path": f"{generated}/{query.get('path', '')}".rstrip("/")})
    _, rg = await run_search(shared_session.tool_context(), args, "rg")
    _, py = await run_search(shared_session.tool_context(), args, "python")
    assert (rg.engine, py.engine) == ("rg", "python")
    assert rg.files or rg.paths, "a parity query should find something"
    assert rg.model_dump(exclude={"engine"}) == py.model_dump(exclude={"engine"})


def test_glob_hands_ripgrep_only_plain_name_globs() -> None:
    assert name_globs("**/*.py") == ["*.py"] and name_globs("src/test_?.rs") == ["test_?.rs"]
    assert name_globs("Makefile") == ["Makefile"]
    # Our own rules (classes, alternatives, a leading dot, **) stay with the daemon's regex.
    for pattern in ("src/**", "**/*.{log,md}", "**/.*", "[ab].py", "dir/"):
        assert name_globs(pattern) == [], pattern


@pytest.mark.parametrize("pattern", ["**/*.py", "*.txt", "src/**", "**/*.{log,md}", "**/.*"])
async def test_glob_gives_identical_results_with_and_without_ripgrep(
    shared_session: Session, generated: str, pattern: str
) -> None:
    for hidden in (False, True):
        args = GlobInput(pattern=pattern, include_hidden=hidden, limit=5000)
        assert await find_files(shared_session.tool_context(), generated, pattern, args, "rg") == await find_files(
            shared_session.tool_context(), generated, pattern, args, "python"
        )


async def test_git_directories_stay_out_even_when_an_ignore_file_lets_them_in(shared_session: Session) -> None:
    """ripgrep meets a hidden .git only where an ignore file re-includes it; the daemon then
    drops it from the results itself, so both engines still leave every .git out."""
    root = f"/workspace/g-{uuid.uuid4().hex[:8]}"
    files = {".gitignore": "!.git\n!.git/\n!.*\n", ".git/config": "needle in git\n", "sub/.git": "needle gitfile\n",
             "sub/deep/.git/HEAD": "needle deep\n", "a.git.txt": "needle kept\n", ".gitx/y.txt": "needle dotdir\n"}
    for rel, content in files.items():
        await shared_session.write_file(f"{root}/{rel}", content)
    for hidden in (False, True):
        for mode in ("files_with_matches", "content", "count"):
            args = GrepInput(pattern="needle", path=root, output_mode=mode, include_hidden=hidden)
            replies = [(await run_search(shared_session.tool_context(), args, engine))[1] for engine in ("rg", "python")]
            rg, py = ([f.path for f in r.files] or r.paths for r in replies)
            assert rg == py == [".gitx/y.txt", "a.git.txt"], (hidden, mode, rg, py)
        glob = GlobInput(pattern="**", include_hidden=hidden, limit=100)
        listed = [await find_files(shared_session.tool_context(), root, "**", glob, engine) for engine in ("rg", "python")]
        assert listed[0] == listed[1]
        assert not [p for p, _ in listed[0][1] if ".git" in p.split("/")], listed[0]


async def test_image_without_ripgrep_uses_the_python_engine(
    rt: Runtime, generated: str, shared_session: Session
) -> None:
    tag = "caisson-test/norg:latest"
    base = resolve_base(rt.backend.client)
    rt.backend.client.images.build(
        fileobj=io.BytesIO(f"FROM {base}\nRUN rm -f /usr/bin/rg\n".encode()), tag=tag, rm=True, network_mode="none"
    )
    async with rt.session(image=tag) as bare:
        assert (await bare.ping()).rg is None
        await make_tree(bare, generated, files=1200, seed=11)
        for query in PARITY_QUERIES[:6]:
            args = GrepInput.model_validate({**query, "path": generated})
            _, here = await run_search(bare.tool_context(), args)
            _, with_rg = await run_search(shared_session.tool_context(), args)
            assert (here.engine, with_rg.engine) == ("python", "rg")
            assert here.model_dump(exclude={"engine"}) == with_rg.model_dump(exclude={"engine"})
        r = await call(bare, "glob", pattern="**/*.md", path=generated, sort_by="path")
        assert r.ok and r.data["total"] > 0


async def make_files(session: Session, name: str, count: int, body: str) -> str:
    """A new directory below /workspace where ``body`` (Python, with ``os``, ``root`` and ``i``)
    ran once for each i in range(count); its path."""
    root = f"/workspace/{name}-{uuid.uuid4().hex[:8]}"
    loop = "".join("    " + line + "\n" for line in body.splitlines())
    script = f"import os, sys\nroot = sys.argv[1]\nfor i in range({count}):\n{loop}"
    result = await session.exec(["python3", "-c", script, root], timeout=120)
    assert result.exit_code == 0, result.stderr
    return root


async def test_glob_over_a_listing_that_arrives_in_many_pieces(shared_session: Session) -> None:
    """The daemon takes ripgrep's names while it still walks: 6,000 long names (far more than
    a pipe holds) must come out whole, each once, as the Python engine lists them."""
    root = await make_files(shared_session, "pieces", 6000, (
        "d = os.path.join(root, 'd%02d' % (i % 40), 'ü' * 20 + '-%04d' % i)\n"
        "os.makedirs(d, exist_ok=True)\n"
        "p = os.path.join(d, 'name-with-some-length-%04d.py' % i)\n"
        "open(p, 'w').close()\n"
        "os.utime(p, (i, i))\n"
    ))
    args = GlobInput(pattern="**/*.py", limit=10000)
    total, files, timed_out = await find_files(shared_session.tool_context(), root, "**/*.py", args, "rg")
    assert (total, timed_out) == (6000, False)
    assert [mtime for _, mtime in files] == [float(i) for i in range(5999, -1, -1)]  # newest first, none twice
    assert (total, files, timed_out) == await find_files(shared_session.tool_context(), root, "**/*.py", args, "python")


async def test_grep_content_over_output_that_arrives_in_many_pieces(shared_session: Session) -> None:
    """The daemon parses ripgrep's lines while it still searches: 4,000 files of long matching
    lines (far more than a pipe holds), some with a NUL byte far after their matches (ripgrep
    notes it after printing them), come out as the Python engine finds them, every file once,
    binary ones left out."""
    root = await make_files(shared_session, "grep-pieces", 4000, (
        "d = os.path.join(root, 'd%02d' % (i % 30))\n"
        "os.makedirs(d, exist_ok=True)\n"
        "text = ''.join('needle %d %s\\n' % (n, 'ü' * 60) for n in range(3))\n"
        "tail = 'x' * 300_000 + '\\0binary\\n' if i % 97 == 0 else 'plain\\n'\n"
        "open(os.path.join(d, 'f%04d.txt' % i), 'w').write(text + tail)\n"
    ))
    args = GrepInput(pattern="needle", path=root, output_mode="content", limit=100_000)
    _, rg = await run_search(shared_session.tool_context(), args, "rg")
    _, py = await run_search(shared_session.tool_context(), args, "python")
    assert (rg.engine, py.engine) == ("rg", "python")
    assert len(rg.files) == 4000 - len(range(0, 4000, 97))  # each text file once, no binary one
    assert rg.model_dump(exclude={"engine"}) == py.model_dump(exclude={"engine"})


async def test_grep_content_reads_names_with_line_breaks_as_they_are(shared_session: Session) -> None:
    """A name may hold a line break (and look like ripgrep's binary-file note): content
    searches show every file by its real name, the file before it keeps its hits, and files
    whose NUL byte comes after their matches stay out, as with the Python engine."""
    root = await make_files(shared_session, "line-break-names", 300, (
        "os.makedirs(root, exist_ok=True)\n"
        "name = 'f%03d\\nfake%03d.txt' % (i, i) if i % 2 else 'f%03d: WARNING: stopped\\nx%03d' % (i, i)\n"
        "tail = 'x' * 300_000 + '\\0binary\\n' if i % 7 == 0 else 'plain\\n'\n"
        "open(os.path.join(root, name), 'w').write('needle\\nneedle\\n' + tail)\n"
    ))
    args = GrepInput(pattern="needle", path=root, output_mode="content", limit=100_000)
    _, rg = await run_search(shared_session.tool_context(), args, "rg")
    _, py = await run_search(shared_session.tool_context(), args, "python")
    assert (rg.engine, py.engine) == ("rg", "python")
    assert sorted(f.path for f in rg.files) == sorted(
        (f"f{i:03d}\nfake{i:03d}.txt" if i % 2 else f"f{i:03d}: WARNING: stopped\nx{i:03d}")
        for i in range(300) if i % 7)
    assert rg.model_dump(exclude={"engine"}) == py.model_dump(exclude={"engine"})
