"""The provider's lifecycle beyond the self-check: --no-sandbox-cleanup leaves the sample's
container running and attachable; `inspect sandbox cleanup caisson <id>` removes it."""

from __future__ import annotations

import shlex
import subprocess

import pytest

from caisson import Runtime
from caisson.config import RuntimeConfig
from caisson.docker import containers
from caisson.integrations.inspect import CaissonSandboxEnvironment

pytestmark = pytest.mark.anyio


async def test_no_cleanup_leaves_a_running_session_that_cli_cleanup_removes() -> None:
    await CaissonSandboxEnvironment.task_init("keep", None)
    envs = await CaissonSandboxEnvironment.sample_init("keep", None, {})
    env = envs["default"].as_type(CaissonSandboxEnvironment)
    await env.write_file("note.txt", "left for a person to look at\n")
    conn = await env.connection()
    # What a person would run to look inside: a shell as the sandbox user, in the workdir.
    argv = [a for a in shlex.split(conn.command) if a != "-it"] + ["-c", "whoami; pwd; cat note.txt"]
    shown = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert shown.stdout.splitlines() == ["agent", "/workspace", "left for a person to look at"], shown.stderr
    session_id = env.session.id
    await CaissonSandboxEnvironment.task_cleanup("keep", None, False)  # sample_cleanup is skipped then

    async with Runtime(RuntimeConfig(gc_on_start=True)) as rt:
        again = await rt.reattach(session_id)
        try:
            assert await again.read_file("/workspace/note.txt") == b"left for a person to look at\n"
        finally:
            await again.detach()
    await CaissonSandboxEnvironment.cli_cleanup(session_id)
    async with Runtime(RuntimeConfig(gc_on_start=False)) as rt:
        assert containers.find_session_container(rt.client, session_id) is None
