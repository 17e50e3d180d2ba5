"""Seed 002 (Grida fundamental tools): read_file with a freshness token, edit_file and
write_file with the version-checked staleness guard, list_files, grep_files, the todo_write
example and the tool_search sketch, in a real `grida` session."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from caisson import Runtime, Session
from tests.conformance.conftest import as_json, profile_session, sh

pytestmark = pytest.mark.anyio
W = "/workspace"


@pytest.fixture(scope="module")
async def s(rt: Runtime, engine: str) -> AsyncIterator[Session]:
    async with profile_session(rt, "grida", engine) as session:
        await sh(session, f"mkdir -p {W}/notes && printf '<svg>\\n  <rect  x=\"1\"/>\\n</svg>\\n' > {W}/canvas.svg "
                          f"&& printf 'Draft\\ndraft two\\n' > {W}/notes/draft.md")
        yield session


async def test_read_file_content_and_version(s: Session) -> None:
    """002 ::read_file - "Read a file's content + a freshness token"."""
    r = await s.call("read_file", {"path": "/canvas.svg"})
    value = as_json(r)
    assert value["content"] == '<svg>\n  <rect  x="1"/>\n</svg>\n'
    assert isinstance(value["version"], str) and value["version"]
    missing = await s.call("read_file", {"path": "/none.svg"})
    assert not missing.ok
    assert as_json(missing) == {"ok": False, "reason": "not_found", "message": "No file at /none.svg."}


async def test_edit_file_match_and_replace(s: Session) -> None:
    """002 ::edit_file - literal substring first, then a whitespace-normalized fallback; the
    result carries the new version and the number of occurrences."""
    version = as_json(await s.call("read_file", {"path": "/canvas.svg"}))["version"]
    r = await s.call("edit_file", {"path": "/canvas.svg", "old_string": '<rect x="1"/>',
                                   "new_string": '<rect x="2"/>', "version": version})
    value = as_json(r)
    assert r.ok and value["ok"] is True and value["occurrences"] == 1 and value["version"] != version
    assert await sh(s, f"cat {W}/canvas.svg") == '<svg>\n  <rect x="2"/>\n</svg>\n'


async def test_edit_file_staleness_guard(s: Session) -> None:
    """002 ::edit_file - "plus our version-checked staleness guard": an edit with a version older
    than the file is refused (reason stale, current_version) and nothing changes."""
    old = as_json(await s.call("read_file", {"path": "/notes/draft.md"}))["version"]
    await sh(s, f"printf 'Draft\\ndraft two\\nhuman edit\\n' > {W}/notes/draft.md")
    r = await s.call("edit_file", {"path": "/notes/draft.md", "old_string": "Draft", "new_string": "Final",
                                   "version": old})
    value = as_json(r)
    assert not r.ok and value["reason"] == "stale" and value["current_version"] != old
    assert value["message"] == "File at /notes/draft.md changed since you last read it."
    assert await sh(s, f"cat {W}/notes/draft.md") == "Draft\ndraft two\nhuman edit\n"


async def test_edit_file_rejections(s: Session) -> None:
    """002 ::edit_file - "Ambiguous matches reject unless replace_all: true"; not found; no-op."""
    await sh(s, f"printf 'a b\\na b\\n' > {W}/amb.txt")
    version = as_json(await s.call("read_file", {"path": "/amb.txt"}))["version"]
    ambiguous = as_json(await s.call("edit_file", {"path": "/amb.txt", "old_string": "a b", "new_string": "c",
                                                   "version": version}))
    assert ambiguous["reason"] == "ambiguous" and ambiguous["occurrences"] == 2
    missing = as_json(await s.call("edit_file", {"path": "/amb.txt", "old_string": "zzz", "new_string": "c",
                                                 "version": version}))
    assert missing["reason"] == "not_found"
    same = as_json(await s.call("edit_file", {"path": "/amb.txt", "old_string": "a b", "new_string": "a b",
                                              "version": version}))
    assert same["reason"] == "no_op"
    every = as_json(await s.call("edit_file", {"path": "/amb.txt", "old_string": "a b", "new_string": "c",
                                               "replace_all": True, "version": version}))
    assert every["ok"] is True and every["occurrences"] == 2
    empty = await s.call("edit_file", {"path": "/amb.txt", "old_string": "", "new_string": "c",
                                       "version": version})
    assert not empty.ok


async def test_write_file_permissive_and_checked(s: Session) -> None:
    """002 ::write_file - version optional: omit it for a permissive write, include it (from the
    last read) for a staleness-safe rewrite."""
    created = as_json(await s.call("write_file", {"path": "/notes/new.md", "content": "v1\n"}))
    assert created["ok"] is True
    checked = as_json(await s.call("write_file", {"path": "/notes/new.md", "content": "v2\n",
                                                  "version": created["version"]}))
    assert checked["ok"] is True and checked["version"] != created["version"]
    stale = as_json(await s.call("write_file", {"path": "/notes/new.md", "content": "v3\n",
                                                "version": created["version"]}))
    assert stale["reason"] == "stale" and stale["current_version"] == checked["version"]
    assert await sh(s, f"cat {W}/notes/new.md") == "v2\n"
    missing = as_json(await s.call("write_file", {"path": "/notes/gone.md", "content": "x",
                                                  "version": created["version"]}))
    assert missing["reason"] == "not_found"


async def test_list_files(s: Session) -> None:
    """002 ::list_files - "Enumerate every known file. Sorted absolute paths."."""
    value = as_json(await s.call("list_files", {}))
    assert value["files"] == sorted(value["files"])
    assert {"/canvas.svg", "/notes/draft.md"} <= set(value["files"])
    assert all(path.startswith("/") for path in value["files"])


async def test_grep_files(s: Session) -> None:
    """002 ::grep_files - literal, case-sensitive by default (grep -n -F), one entry per matching
    line {path, line, text} with a 1-indexed line and the full line; case_sensitive false for -i;
    path_prefix narrows the scope."""
    await sh(s, f"printf 'x = a.b(c)\\nDraft again\\n' > {W}/notes/regex.md")
    literal = as_json(await s.call("grep_files", {"pattern": "a.b(c)"}))
    assert literal["matches"] == [{"path": "/notes/regex.md", "line": 1, "text": "x = a.b(c)"}]
    assert literal["files_scanned"] >= 4
    sensitive = as_json(await s.call("grep_files", {"pattern": "Draft", "path_prefix": "/notes/"}))
    assert [(m["path"], m["line"]) for m in sensitive["matches"]] == [
        ("/notes/draft.md", 1), ("/notes/regex.md", 2)]
    insensitive = as_json(await s.call("grep_files", {"pattern": "draft", "case_sensitive": False,
                                                      "path_prefix": "/notes/dr"}))
    assert [m["text"] for m in insensitive["matches"]] == ["Draft", "draft two"]
    assert insensitive["files_scanned"] == 1


async def test_todo_write_example(s: Session) -> None:
    """002 ::todo_write - the example list; the whole list replaces the previous one; "Exactly one
    in_progress at a time. Enforced socially by the prompt": two are kept, with a warning."""
    todo = {"content": "Add a star", "activeForm": "Adding a star", "status": "in_progress"}
    r = await s.call("todo_write", {"todos": [todo]})
    assert r.ok and r.data["todos"] == [todo] and "Adding a star" in r.text
    replaced = await s.call("todo_write", {"todos": [{**todo, "status": "completed"}]})
    assert replaced.data["todos"] == [{**todo, "status": "completed"}]
    two = await s.call("todo_write", {"todos": [todo, {**todo, "content": "Add a moon"}]})
    assert two.ok and len(two.data["todos"]) == 2 and "exactly one in_progress" in two.text


async def test_tool_search_sketch(s: Session) -> None:
    """002 ::tool_search - query (free-text intent) or select (exact names), max_results;
    -> {tools: [{name, description, schema}]}."""
    found = await s.call("tool_search", {"query": "grep files", "max_results": 2})
    tools = found.data["tools"]
    assert 1 <= len(tools) <= 2 and tools[0]["name"] == "grep_files"
    assert set(tools[0]) == {"name", "description", "schema"}
    selected = await s.call("tool_search", {"select": ["read_file", "todo_write"]})
    assert [t["name"] for t in selected.data["tools"]] == ["read_file", "todo_write"]
    assert "path" in selected.data["tools"][0]["schema"]["properties"]


async def test_list_and_grep_see_dot_files_and_ignored_files(s: Session) -> None:
    """002 ::list_files "Enumerate every known file" and ::grep_files "Literal substring search
    across every known file": files the agent wrote count even when hidden or gitignored."""
    await s.call("write_file", {"path": "/.env.example", "content": "KNOWN=1\n"})
    await sh(s, f"printf 'scratch/\\n' > {W}/.gitignore && mkdir -p {W}/scratch && printf 'KNOWN=2\\n' > {W}/scratch/n.md")
    files = set(as_json(await s.call("list_files", {}))["files"])
    assert {"/.env.example", "/.gitignore", "/scratch/n.md"} <= files
    # A secret file is known too, but a search does not show what a read would refuse.
    await s.call("write_file", {"path": "/.env", "content": "KNOWN=secret\n"})
    found = {m["path"] for m in as_json(await s.call("grep_files", {"pattern": "KNOWN="}))["matches"]}
    assert found == {"/.env.example", "/scratch/n.md"}


async def test_the_agents_own_absolute_paths(s: Session) -> None:
    """002: "read_file("/canvas.svg") makes the same sense whether the path resolves to an
    in-memory map, an OPFS file, a real node:fs file under a tmp dir": the agent's `/` is the
    session's workspace, and the agent only ever sees its own paths back."""
    written = as_json(await s.call("write_file", {"path": "/notes/draft2.md", "content": "from the schema example\n"}))
    assert written["ok"] is True
    assert await sh(s, f"cat {W}/notes/draft2.md") == "from the schema example\n"
    listing = as_json(await s.call("list_files", {}))
    assert "/notes/draft2.md" in listing["files"] and not any(f.startswith(W + "/") for f in listing["files"])
    hits = as_json(await s.call("grep_files", {"pattern": "schema example"}))
    assert hits["matches"] == [{"path": "/notes/draft2.md", "line": 1, "text": "from the schema example"}]
    # ".." stays inside the agent's filesystem.
    escaped = as_json(await s.call("read_file", {"path": "/../../etc/hostname"}))
    assert escaped["ok"] is False and escaped["reason"] == "not_found"
