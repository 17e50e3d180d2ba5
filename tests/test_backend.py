"""The backend seam is real: a ``Runtime`` runs sessions over a backend that is not Docker.

``ProcessBackend`` keeps its "containers" in memory and runs each session's daemon as a plain
process of this host (the daemon's own tests do the same), reached over its stdin/stdout as the
attach stream would be. Everything above the seam (sessions, tools, policy, audit, diffs of
the files a session started with, the reaper) works unchanged; nothing here imports Docker.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import anyio.abc
import pytest

from caisson import Runtime, RuntimeConfig, SessionConfig
from caisson.backend import Backend, BaseScan, EngineFacts, OldFile, Reaped, Sandbox, SandboxRow
from caisson.errors import DaemonDied, SessionError
from caisson.transport.channel import ByteTransport

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[1]


class ProcessStream:
    def __init__(self, process: anyio.abc.Process) -> None:
        self._process = process

    async def receive(self) -> bytes:
        assert self._process.stdout is not None
        try:
            return await self._process.stdout.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            return b""

    async def send(self, data: bytes) -> None:
        assert self._process.stdin is not None
        await self._process.stdin.send(data)

    async def aclose(self) -> None:
        assert self._process.stdin is not None
        await self._process.stdin.aclose()

    @property
    def stderr_tail(self) -> str:
        return ""


class Files:
    """The image's side of a diff: the files the workspace held when the session was made."""

    def __init__(self, base: dict[str, bytes]) -> None:
        self._base = base

    def scan(self, root: str, current: dict[str, tuple[int, int]]) -> BaseScan:
        return BaseScan(
            differing={rel: OldFile(size=len(data), data=data) for rel, data in self._base.items()},
            paths=set(self._base),
        )

    def old_file(self, path: str) -> OldFile:
        data = self._base[os.path.basename(path)]
        return OldFile(size=len(data), data=data)

    def close(self) -> None:
        pass


class ProcessBackend:
    def __init__(self, tmp: Path) -> None:
        self._tmp = tmp
        self.rows: dict[str, SandboxRow] = {}
        self.processes: dict[str, anyio.abc.Process] = {}
        self.workspaces: dict[str, Path] = {}
        self.snapshots: list[str] = []
        self.calls: list[str] = []

    @property
    def address(self) -> str:
        return "process://local"

    async def open(
        self, owner: str, *, leased: Callable[[], dict[str, tuple[float, bool]]], soft_quotas: Callable[[], dict[str, int]]
    ) -> None:
        self.calls.append("open")

    async def aclose(self) -> None:
        self.calls.append("aclose")

    async def ping(self) -> None:
        pass

    async def watch_deaths(self, on_death: Callable[[str, str, float], Awaitable[None]], since: float) -> None:
        await anyio.sleep_forever()

    async def facts(self) -> EngineFacts:
        return EngineFacts(engine="process", address=self.address)

    async def prepare_image(self, image: str | None, *, rebuild: bool = False) -> str:
        return image or "none"

    async def list_images(self) -> list[dict[str, object]]:
        return []

    async def prune_images(self) -> list[str]:
        return []

    async def create(self, session_id: str, owner: str, config: SessionConfig, *, listen: bool) -> Sandbox:
        cid = uuid.uuid4().hex
        workspace = Path(config.workdir)
        workspace.mkdir(parents=True)
        (workspace / "start.txt").write_bytes(b"as made\n")
        self.workspaces[cid] = workspace
        self.rows[cid] = SandboxRow(id=cid, session_id=session_id, tenant=config.tenant, owner=owner, state="created")
        return Sandbox(id=cid, session_id=session_id)

    async def attach(self, container_id: str, *, timeout: float) -> ByteTransport:
        env = {**os.environ, "CAISSON_AGENT_USER": "root", "CAISSON_WORKSPACE": str(self.workspaces[container_id])}
        process = await anyio.open_process([sys.executable, "-m", "sandbox"], cwd=str(ROOT), env=env)
        self.processes[container_id] = process
        return ProcessStream(process)

    async def start(self, sandbox: Sandbox) -> Sandbox:
        self.rows[sandbox.id] = self.rows[sandbox.id].model_copy(update={"state": "running"})
        return sandbox

    async def reachable(self, sandbox: Sandbox) -> Sandbox:
        return sandbox

    async def connect(
        self, sandbox: Sandbox, attach: ByteTransport | None, *, timeout: float, wait: bool = True
    ) -> ByteTransport:
        return attach if attach is not None else await self.attach(sandbox.id, timeout=timeout)

    async def remove(self, container_id: str) -> None:
        self.calls.append(f"remove {container_id}")
        process = self.processes.pop(container_id, None)
        if process is not None and process.returncode is None:
            process.kill()
            await process.wait()
        self.rows.pop(container_id, None)

    async def find(self, session_id: str) -> SandboxRow | None:
        return next((r for r in self.rows.values() if r.session_id == session_id), None)

    async def list_sandboxes(self) -> list[SandboxRow]:
        return list(self.rows.values())

    async def reap(self, spare: frozenset[str], *, all_owners: bool = False) -> list[Reaped]:
        gone = [r for r in self.rows.values() if r.session_id not in spare and (all_owners or r.owner == "dead")]
        for row in gone:
            await self.remove(row.id)
        return [Reaped(session=r.session_id, container=r.id[:12], reason="owner process is gone") for r in gone]

    async def snapshot(self, container_id: str, session_id: str, owner: str, ttl: float) -> str:
        self.snapshots.append(f"snap-{session_id}")
        return self.snapshots[-1]

    async def remove_snapshot(self, ref: str) -> None:
        self.snapshots.remove(ref)

    async def snapshot_bytes(self, ref: str) -> int:
        return 0

    async def layer_bytes(self, container_id: str) -> int:
        return 0

    async def base_files(self, container_id: str) -> Files:
        return Files({"start.txt": b"as made\n"})

    async def death_cause(self, container_id: str) -> str | None:
        return "the test killed it"

    async def keep(self, container_id: str, *, gvisor: bool, until: float) -> None:
        self.calls.append(f"keep {container_id}")

    def pool_start(self, owner: str, config: SessionConfig, size: int, *, listen: bool) -> None:
        raise AssertionError("no pool in this test")

    def pool_take(self, config: SessionConfig) -> Sandbox | None:
        return None

    def pool_session_ids(self) -> frozenset[str]:
        return frozenset()

    async def pool_ready(self, timeout: float) -> bool:
        return False


def test_the_fake_is_a_backend(tmp_path: Path) -> None:
    backend: Backend = ProcessBackend(tmp_path)  # mypy would refuse a drifted fake here too
    assert backend.address == "process://local"


async def test_a_runtime_runs_sessions_over_another_backend(tmp_path: Path) -> None:
    backend = ProcessBackend(tmp_path / "boxes")
    (tmp_path / "boxes").mkdir()
    config = RuntimeConfig(state_dir=str(tmp_path / "state"))
    async with Runtime(config, backend=backend) as rt:
        ws = str(tmp_path / "boxes" / "ws")
        async with rt.session(workdir=ws, agent_user="root") as s:
            r = await s.exec("echo hi from $(basename $PWD)")
            assert (r.stdout, r.exit_code) == ("hi from ws\n", 0)
            await s.write_file(f"{ws}/start.txt", b"changed\n")
            tool = await s.call("bash", {"command": f"cat {ws}/start.txt"})
            assert tool.ok and "changed" in tool.text
            changes = await s.diff(ws)
            assert [(c.path, c.change) for c in changes.changes] == [("start.txt", "modified")]
            assert (await rt.snapshot(s)).startswith("snap-")
            cid = s.container_id
        assert f"remove {cid}" in backend.calls and cid not in backend.rows
        assert backend.snapshots == ["snap-" + s.id]  # kept until the runtime closes
        # The reaper goes through the backend: another owner's dead session is collected.
        orphan = await backend.create("s-orphan", "dead", SessionConfig(workdir=str(tmp_path / "o")), listen=False)
        reaped = await rt.gc()
        assert [r.session for r in reaped] == ["s-orphan"] and orphan.id not in backend.rows
        with pytest.raises(SessionError, match="no running container"):
            await rt.reattach("s-nobody")
    assert backend.snapshots == [] and backend.calls[-1] == "aclose"


async def test_a_dead_daemon_is_explained_by_the_backend(tmp_path: Path) -> None:
    backend = ProcessBackend(tmp_path)
    config = RuntimeConfig(state_dir=str(tmp_path / "state"))
    async with Runtime(config, backend=backend) as rt, rt.session(workdir=str(tmp_path / "ws"), agent_user="root") as s:
        backend.processes[s.container_id].kill()
        with pytest.raises(DaemonDied, match="the test killed it"):
            await s.exec("true", timeout=30)
