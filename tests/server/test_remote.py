"""``RemoteRuntime``: one harness function, run against a local ``Runtime`` and against a
server; it gets the same answers from both."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest

from caisson import RemoteRuntime, Runtime
from caisson.errors import CaissonError, OpError
from caisson.remote import RemoteError
from tests.server.harness import Api, untar

pytestmark = pytest.mark.anyio


async def episode(rt: Any, repo: Path, image: str | None) -> dict[str, Any]:
    """What a harness does with a session; ``rt`` is a Runtime or a RemoteRuntime."""
    seen: dict[str, Any] = {}
    async with rt.session(image=image) as s:
        await s.copy_in(repo, "/workspace/repo")
        r = await s.exec("cat calc.py | wc -l; echo oops >&2; exit 2", cwd="/workspace/repo", timeout=30)
        seen["exec"] = (r.stdout, r.stderr, r.exit_code)
        await s.write_file("/workspace/data.bin", b"\x00\xff" * 1000)
        seen["read"] = await s.read_file("/workspace/data.bin")
        edit = await s.call("edit_file", {"path": "/workspace/repo/calc.py", "old_string": "a - b", "new_string": "a + b"})
        seen["edit"] = (edit.ok, edit.decision)
        seen["denied"] = (await s.call("bash", {"command": "rm -rf /"})).decision
        task = await s.spawn("printf one; sleep 0.2; printf two")
        out, at = "", 0
        while True:
            chunk = await s.task_read(task.task_id, stdout_offset=at, wait=2)
            out, at = out + chunk.stdout, chunk.stdout_offset
            if not chunk.running and chunk.stdout == "":
                break
        seen["task"] = out
        streamed = []
        async with contextlib.aclosing(s.exec_stream("for i in 1 2 3; do echo $i; sleep 0.1; done")) as events:
            async for ev in events:
                streamed.append((ev.kind, ev.data, ev.exit_code))
        seen["stream"] = ("".join(d for k, d, _ in streamed if k == "stdout"), streamed[-1])
        seen["tools"] = sorted(t["function"]["name"] for t in s.tools("openai"))
        tar = b"".join([chunk async for chunk in s.copy_out("/workspace/repo")])
        seen["copy_out"] = untar(tar)
        with pytest.raises(OpError) as missing:
            await s.read_file("/workspace/missing.txt")
        seen["missing"] = missing.value.code
        ref = await s.snapshot()
    async with rt.session(from_snapshot=ref) as restored:
        seen["restored"] = await restored.read_file("/workspace/repo/calc.py")
    return seen


async def test_one_line_switches_local_to_hosted(sqlite_api: Api, sandbox_image: str, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    t = sqlite_api.tenant("remote")

    async with Runtime(state_dir=str(tmp_path / "state")) as rt:
        local = await episode(rt, repo, sandbox_image)
    async with RemoteRuntime(sqlite_api.url, t.token) as rt:       # the one line that changes
        hosted = await episode(rt, repo, None)

    assert hosted == local
    assert hosted["exec"] == ("2\n", "oops\n", 2) and hosted["edit"] == (True, "warn")
    assert hosted["task"] == "onetwo" and hosted["stream"] == ("1\n2\n3\n", ("exit", "", 0))
    assert hosted["restored"] == b"def add(a, b):\n    return a + b\n"


async def test_remote_errors_are_the_librarys(sqlite_api: Api) -> None:
    t = sqlite_api.tenant("remote-errors", max_sessions=1)
    async with RemoteRuntime(sqlite_api.url, t.token) as rt, rt.session() as s:
        with pytest.raises(RemoteError) as quota:
            await rt.open_session()
        assert quota.value.status == 429 and quota.value.retry_after
        with pytest.raises(OpError) as no_task:
            await s.task_read("t-none")
        assert no_task.value.code == "no_such_task"
        with pytest.raises(CaissonError, match="agent_user"):  # the server's to decide: refused, not dropped
            await rt.open_session(agent_user="root")
        with pytest.raises(RemoteError) as no_network:  # the tenant's quotas allow no network
            await rt.open_session(network=True)
        assert no_network.value.status == 403
    async with RemoteRuntime(sqlite_api.url, "cai_kbad_secret") as rt:
        with pytest.raises(RemoteError) as bad:
            await rt.open_session()
        assert bad.value.status == 401


async def test_the_remote_client_speaks_v1_and_attaches(sqlite_api: Api) -> None:
    """Every request RemoteRuntime sends is on the /v1 paths (the server's request log shows
    them), and ``attach`` takes up a session by its id with its files and tasks."""
    t = sqlite_api.tenant("remote-v1")
    async with RemoteRuntime(sqlite_api.url, t.token) as rt:
        s = await rt.open_session()
        await s.write_file("/workspace/kept.txt", "kept\n")
        task = await s.spawn("echo from the first client")
        await s.task_wait(task.task_id, timeout=30)
    async with RemoteRuntime(sqlite_api.url, t.token) as rt:
        again = await rt.attach(s.id)
        assert await again.read_file("/workspace/kept.txt") == b"kept\n"
        assert (await again.task_read(task.task_id)).stdout == "from the first client\n"
        assert (await again.stat("/workspace/kept.txt")).size == 5
        await again.close()
    with t.client() as c:
        paths = [r["path"] for r in c.get("/v1/audit/requests", params={"limit": 1000}).json()["items"]]
    print(f"{len(paths)} requests of the remote client: {sorted(set(p.split('/')[-1] for p in paths))}")
    assert len(paths) >= 10 and all(p.startswith("/v1/") for p in paths), paths
