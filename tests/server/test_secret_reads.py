"""A tenant's every way to read or list a session's files through ``caisson serve`` follows the
secret policy and the session's roots, as the agent's tool calls do: read, byte ranges, stat,
walks, listings, copy-out, diff, and commands' output (exec, spawn, exec-stream), with every
approval denied. The secrets are planted by root (docker exec), as a harness's set-up would."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import docker
import pytest
from pydantic import BaseModel

from caisson import RemoteRuntime, RemoteSession
from caisson.errors import CaissonError
from tests.server.harness import Api, approving, untar

pytestmark = pytest.mark.anyio

TOKEN = f"tok-{uuid.uuid4().hex}"
W = "/workspace"
SECRETS = (".env", "config/prod.env", "deploy/id_ed25519", "certs/server.KEY", "credentials.json")
PLANT = " && ".join([
    f"cd {W} && mkdir -p config deploy certs sub",
    *(f"printf 'KEY={TOKEN}\\n' > {name}" for name in SECRETS),
    "printf 'ordinary\\n' > notes.txt",
    "chown -R agent:agent . && chmod 600 .env config/prod.env deploy/id_ed25519 certs/server.KEY credentials.json",
    "ln .env linked.txt && ln -s .env sym.txt && ln -s ../.env sub/up && ln -s /workspace/config cfg",
    "printf 'sym.txt\\n' > names.txt && mkdir -p /tmp/t",
    # Other names outside the workspace, where the filesystem allows one (not across devices).
    "{ ln .env /tmp/t/linked.txt; ln .env /var/tmp/held; ln .env /dev/shm/held; true; } 2>/dev/null",
    f"printf 'ROOT={TOKEN}\\n' > /root/secret.txt && chmod 600 /root/secret.txt",
    f"printf 'OUT={TOKEN}\\n' > /opt/app.txt && chmod 644 /opt/app.txt",
])
PATHS = [
    f"{W}/.env", ".env", "./.env", f"{W}/config/../.env", f"{W}//.env", f"{W}/.ENV", f"{W}/linked.txt", f"{W}/sym.txt",
    f"{W}/sub/up", f"{W}/cfg/prod.env", f"{W}/config/prod.env", f"{W}/deploy/id_ed25519", f"{W}/certs/server.KEY",
    f"{W}/credentials.json", "/root/secret.txt", "/opt/app.txt", f"{W}/../root/secret.txt", f"/proc/self/root{W}/.env",
    "/proc/1/root/opt/app.txt", "/proc/1/environ",
]
TREES = [W, "/", "/root", "/opt", f"{W}/config", f"{W}/cfg", f"{W}/sub", "/proc/1/root/root"]
COMMANDS = [
    "cat .env", "cat /workspace/.env", "cat linked.txt", "cat sym.txt", "cat sub/up", "cat cfg/prod.env",
    "head -c 200 config/prod.env", "grep -r KEY .", "grep -r KEY /workspace /root /opt", "cat /root/secret.txt",
    "tail deploy/id_ed25519", "base64 credentials.json", "python3 -c 'print(open(\".env\").read())'",
    "sh -c 'cat .env'", "c=.env; cat $c", "cat .e''nv", "cat .e*", "cat ./*/*.env", "awk 1 .env", "sort .env",
    "cp .env /tmp/x && cat /tmp/x", "tar cf - . | cat", "od -c .env", "sed -n p .env", "less .env",
    # Links and other names, which the classifier (judging names) cannot see through.
    "cat sy''m.txt", "cat ./sub/../sym.txt", "cat /workspace//sub/up", "cat sym.tx?", "cat link*.txt", "wc -c linked.txt",
    "cat -- sym.txt", "cat --file=sym.txt", "xargs cat < names.txt", "cat $(echo sym.txt)", "cat cfg/../sym.txt",
    "cat /dev/shm/held", "cat /var/tmp/held", "dd if=sym.txt", "cat /tmp/t/linked.txt", "cat s{y,x}m.txt",
    "cat sy{l..n}.txt", "cat */up", "cat /tmp/*/linked.txt", "cat [s]ym.txt", "cat ~/../../workspace/sym.txt",
    # More words than are looked at, the link last; braces making more names than that.
    "cat " + " ".join(f"n{i}" for i in range(300)) + " sym.txt", "cat n{1..400} sym.txt",
    "cat {0..9}{0..9}{0..9} sym.txt",
]


async def grep_names(s: RemoteSession, tree: str) -> bytes:
    """The files a content search names, read back: a secret's name among them lands its bytes."""
    named = await s.grep(tree, TOKEN, mode="files", hidden=True, no_ignore=True)
    found = b""
    for path in named.paths:
        with contextlib.suppress(CaissonError):
            found += await s.read_file(tree.rstrip("/") + "/" + path)
    return found + " ".join(named.paths).encode()


def plant(engine: docker.DockerClient, session_id: str) -> None:
    [container] = engine.containers.list(filters={"label": f"caisson.session={session_id}"})
    code, out = container.exec_run(["bash", "-c", PLANT])
    assert code == 0, out


async def attempt(landed: list[tuple[str, str]], route: str, target: str, read: Callable[[], Awaitable[Any]]) -> None:
    try:
        got = await read()
    except CaissonError:
        return
    if TOKEN.encode() in _as_bytes(got):
        landed.append((route, target))


def _as_bytes(got: Any) -> bytes:
    if isinstance(got, bytes):
        return got
    if isinstance(got, BaseModel):
        return got.model_dump_json().encode()
    return repr(got).encode()  # text, or a list of entries


async def copied(s: RemoteSession, path: str) -> bytes:
    return b"".join(untar(b"".join([c async for c in s.copy_out(path)])).values())


async def streamed(s: RemoteSession, command: str) -> str:
    async with contextlib.aclosing(s.exec_stream(command, timeout=30)) as events:
        return "".join([ev.data async for ev in events])


async def spawned(s: RemoteSession, command: str) -> str:
    task = await s.spawn(command, timeout=30)
    await s.task_wait(task.task_id, timeout=30)
    out = await s.task_read(task.task_id)
    return out.stdout + out.stderr


@pytest.mark.parametrize("gvisor", [False, True], ids=["runc", "gvisor"])
async def test_a_tenant_reads_no_secret_through_any_route(
    sqlite_api: Api, docker_engine: docker.DockerClient, gvisor: bool
) -> None:
    t = sqlite_api.tenant("secret-reads")
    landed: list[tuple[str, str]] = []
    tried = 0
    async with RemoteRuntime(sqlite_api.url, t.token) as rt, rt.session(gvisor=gvisor) as s:
        plant(docker_engine, s.id)
        with approving(t, "deny") as denied:
            for path in PATHS:
                reads: dict[str, Callable[[], Awaitable[Any]]] = {
                    "read": lambda p=path: s.read_file(p),
                    "read@1": lambda p=path: s.read_file(p, 1, 1000),
                    "range": lambda p=path: s.read_range(p, 0, 4096),
                    "stat": lambda p=path: s.stat(p),
                    "copy_out": lambda p=path: copied(s, p),
                }
                for route, read in reads.items():
                    tried += 1
                    await attempt(landed, route, path, read)
            for tree in TREES:
                looks: dict[str, Callable[[], Awaitable[Any]]] = {
                    "list_dir": lambda p=tree: s.list_dir(p),
                    "walk": lambda p=tree: s.walk(p, include_hidden=True, ignore_files=(), detail=True),
                    "copy_out": lambda p=tree: copied(s, p),
                    "diff": lambda p=tree: s.diff(p),
                    "grep": lambda p=tree: s.grep(p, TOKEN, hidden=True, no_ignore=True, max_total=100_000),
                    "grep -F": lambda p=tree: s.grep(p, TOKEN[4:], fixed_strings=True, hidden=True, no_ignore=True),
                    "grep python": lambda p=tree: s.grep(p, "KEY=", engine="python", hidden=True, no_ignore=True),
                    "grep files": lambda p=tree: grep_names(s, p),
                }
                for route, look in looks.items():
                    tried += 1
                    await attempt(landed, route, tree, look)
            tried += 1
            await attempt(landed, "diff", "(workdir)", s.diff)
            for command in COMMANDS:
                runs: dict[str, Callable[[], Awaitable[Any]]] = {
                    "exec": lambda c=command: s.exec(c, cwd=W, timeout=30),
                    "exec argv": lambda c=command: s.exec(["bash", "-c", c], cwd=W, timeout=30),
                    "spawn": lambda c=command: spawned(s, c),
                    "exec-stream": lambda c=command: streamed(s, c),
                }
                for route, run in runs.items():
                    tried += 1
                    await attempt(landed, route, command, run)
        # Controls: the tenant's ordinary reads and commands work.
        assert await s.read_file(f"{W}/notes.txt") == b"ordinary\n"
        assert (await s.exec("cat notes.txt", cwd=W)).stdout == "ordinary\n"
        assert "notes.txt" in {e.name for e in await s.list_dir(W)}
        assert [f.path for f in (await s.grep(W, "ordinary", hidden=True)).files] == ["notes.txt"]
    print(f"a tenant's reads of secrets through caisson serve ({'gvisor' if gvisor else 'runc'}): tried {tried}, landed {len(landed)}: {landed}; "
          f"{len(denied)} commands went to the tenant's approvers (denied)")
    assert landed == []
    assert denied  # the dangerous commands were asked, not run


RACER = (
    "cd /workspace && while true; do ln -sf .env r.tmp && mv -T r.tmp race.txt; "
    "printf 'plain\\n' > p.tmp && mv -T p.tmp race.txt; done"
)


async def test_a_link_swapped_in_while_a_tenant_reads_lands_nothing(
    sqlite_api: Api, docker_engine: docker.DockerClient
) -> None:
    """Another writer (the agent's background process) swaps a harmless file for a link to the
    secret and back, as fast as it can, while the tenant reads that name through the file
    routes (the daemon reads by the looked-at real name and refuses a link: no window). A
    command's output is not covered: its words are looked at before it runs (README, known
    limits)."""
    t = sqlite_api.tenant("secret-race")
    landed: dict[str, int] = {}
    plain = 0
    rounds = 150
    async with RemoteRuntime(sqlite_api.url, t.token) as rt, rt.session() as s:
        plant(docker_engine, s.id)
        [container] = docker_engine.containers.list(filters={"label": f"caisson.session={s.id}"})
        container.exec_run(["bash", "-c", RACER], user="agent", detach=True)
        with approving(t, "deny"):
            routes: dict[str, Callable[[], Awaitable[Any]]] = {
                "read": lambda: s.read_file(f"{W}/race.txt"),
                "range": lambda: s.read_range(f"{W}/race.txt"),
                "copy_out": lambda: copied(s, f"{W}/race.txt"),
            }
            for route, read in routes.items():
                for _ in range(rounds):
                    try:
                        got = _as_bytes(await read())
                    except CaissonError:
                        continue
                    plain += b"plain" in got
                    if TOKEN.encode() in got:
                        landed[route] = landed.get(route, 0) + 1
    tried = rounds * len(routes)
    print(f"a link to a secret raced in under a tenant's reads: tried {tried}, landed {sum(landed.values())}: "
          f"{landed}; {plain} reads got the plain file")
    assert plain > 0  # the racer's plain file was there to read: the race was on
    assert landed == {}
