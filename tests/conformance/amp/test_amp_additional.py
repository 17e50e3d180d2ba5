"""Seed 001 (Amp), "Additional Tools": undo_edit, delete_file and format_file served by caisson;
finder, oracle, Task (and librarian, kraken, Check) through host hooks."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from caisson import Runtime, Session
from caisson.profiles.hooks import register_hook
from tests.conformance.conftest import profile_session, sh

pytestmark = pytest.mark.anyio
W = "/workspace"


@pytest.fixture(scope="module")
async def s(rt: Runtime, engine: str) -> AsyncIterator[Session]:
    async with profile_session(rt, "amp", engine) as session:
        yield session


async def test_undo_edit(s: Session) -> None:
    """001 Additional Tools / File Operations: undo_edit - "Revert the last edit to a file"."""
    await s.call("create_file", {"path": f"{W}/u.txt", "content": "one\n"})
    await s.call("edit_file", {"path": f"{W}/u.txt", "old_str": "one", "new_str": "two"})
    r = await s.call("undo_edit", {"path": f"{W}/u.txt"})
    assert r.ok and r.data["status"] == "done" and r.data["trackFiles"] == [f"{W}/u.txt"]
    assert "-two\n+one" in r.data["result"]["diff"]
    assert await sh(s, f"cat {W}/u.txt") == "one\n"


async def test_delete_file(s: Session) -> None:
    """001 Additional Tools / File Operations: delete_file - "Delete a file"."""
    await s.call("create_file", {"path": f"{W}/d.txt", "content": "x"})
    r = await s.call("delete_file", {"path": f"{W}/d.txt"})
    assert r.data == {"status": "done", "result": f"Successfully deleted file {W}/d.txt", "trackFiles": [f"{W}/d.txt"]}
    gone = await s.call("delete_file", {"path": f"{W}/d.txt"})
    assert gone.data["status"] == "error"


async def test_format_file(s: Session) -> None:
    """001 Additional Tools / File Operations: format_file - "Auto-format a file"; a file type
    without an installed formatter is a clear error."""
    await s.call("create_file", {"path": f"{W}/f.unknownext", "content": "x"})
    r = await s.call("format_file", {"path": f"{W}/f.unknownext"})
    assert r.data == {"status": "error", "error": {"message": "No formatter available for f.unknownext"}}


async def test_llm_tools_are_listed_and_not_served_without_hook(s: Session) -> None:
    """001 Additional Tools / Subagents and Search: finder, oracle and Task need a language model:
    without a hook the call fails with a clear "not served" error."""
    names = {t["name"] for t in s.tools("anthropic")}
    assert {"finder", "oracle", "Task"} <= names
    r = await s.call("oracle", {"task": "Why is the build slow?"})
    assert not r.ok and r.error is not None and r.error.code == "not_served"
    assert r.data == {"status": "error", "error": {"message": r.text}}
    assert "register_hook('amp', 'oracle', handler)" in r.text


async def test_llm_tool_served_by_a_session_hook(s: Session) -> None:
    """001 Additional Tools: the embedding program serves Task with a hook; the result comes back
    in Amp's envelope."""
    seen: list[dict[str, Any]] = []

    async def task(session: Session, args: dict[str, Any]) -> str:
        seen.append(args)
        return f"sub-agent finished: {args['description']}"

    register_hook("amp", "Task", task, session=s)
    r = await s.call("Task", {"prompt": "Rename foo to bar everywhere", "description": "rename"})
    assert r.data == {"status": "done", "result": "sub-agent finished: rename"}
    assert seen == [{"prompt": "Rename foo to bar everywhere", "description": "rename"}]


async def test_tilde_expands_to_the_agent_home(s: Session) -> None:
    """001 Read, Behavior Contract 3 ("Expand ~ to home directory") and Bash preprocessing
    ("Expands ~ to home directory in cwd"); the home lies outside the workspace, so the
    permission policy refuses the read: the path it names is the expanded one."""
    home = (await sh(s, "printf %s \"$HOME\"")).strip()
    r = await s.call("Read", {"path": "~/notes.txt"})
    assert not r.ok and f"{home}/notes.txt" in r.text


async def test_web_search_and_read_web_page(s: Session) -> None:
    """001 Additional Tools / Search: web_search through the deployment's provider (`none`: no
    results) in Amp's envelope; read_web_page refuses a private address unless allowed."""
    found = await s.call("web_search", {"query": "caisson"})
    assert found.data == {"status": "done", "result": []}
    refused = await s.call("read_web_page", {"url": "http://127.0.0.1:9/"})
    assert refused.data["status"] == "error" and refused.data["error"]["message"]


async def test_tilde_is_the_agents_home(s: Session) -> None:
    """001: paths may start with `~` (the user's home): it is the agent's home, inside the
    session's workspace roots, the same home bash and git use."""
    created = await s.call("create_file", {"path": "~/amp-note.txt", "content": "at home\n"})
    assert created.ok, created.text
    read = await s.call("Read", {"path": "~/amp-note.txt"})
    assert read.ok and "at home" in read.text
    assert (await s.exec("cat $HOME/amp-note.txt", user=s.config.agent_user)).stdout == "at home\n"


async def test_bash_has_no_timeout_of_its_own(s: Session) -> None:
    """001 Bash: Amp runs commands without a timeout; here a command may run as long as the
    session lives (the canonical tool's 600 s cap does not apply)."""
    from caisson.profiles import get_profile

    bash = get_profile("amp").lookup("Bash")
    assert bash is not None
    canonical = await bash.to_canonical(bash.input_model.model_validate({"cmd": "true"}), s.tool_context())
    assert canonical.timeout == s.config.ttl > 600
