"""The hosted API as a platform uses it, against SQLite and against PostgreSQL: keys, sessions,
tool calls and primitives, tasks, copies, snapshots, forks, approvals, quotas, limits, audit."""

from __future__ import annotations

import socket
import ssl
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import docker
import httpx
import pytest

from caisson import RemoteRuntime
from caisson.errors import CaissonError
from caisson.server.models import SessionInfo
from caisson.server.store import Store, database_url
from tests.server.harness import Api, TenantKey, approving, leave_session, tar_of, untar

DANGEROUS = 'python3 -c "print(6 * 7)"'


def open_session(c: httpx.Client, **body: Any) -> str:
    r = c.post("/sessions", json=body)
    assert r.status_code == 201, r.text
    sid: str = r.json()["id"]
    return sid


def test_keys_scopes_and_revocation(api: Api) -> None:
    t = api.tenant("keys")
    with httpx.Client(base_url=api.url) as anon:
        assert anon.get("/sessions").status_code == 401
        assert anon.get("/sessions", headers={"Authorization": "Bearer cai_knope_wrong"}).status_code == 401
        wrong_secret = t.token[: -4] + "AAAA"
        assert anon.get("/sessions", headers={"Authorization": f"Bearer {wrong_secret}"}).status_code == 401
    with t.client() as c:
        assert c.get("/sessions").json() == []
        assert c.get("/tenants").status_code == 403          # a tenant key cannot manage tenants
    with api.admin as admin:
        assert admin.post("/sessions", json={}).status_code == 403  # an admin key opens no sessions
        keys = admin.get("/keys", params={"tenant_id": t.tenant_id}).json()
        assert [k["id"] for k in keys] == [t.key_id]
        assert "token" not in keys[0] and "digest" not in keys[0]   # only the digest is kept, never shown
        assert admin.delete(f"/keys/{t.key_id}").status_code == 204
    with t.client() as c:
        assert c.get("/sessions").status_code == 401


def test_session_primitives_tools_and_close(api: Api, docker_engine: docker.DockerClient) -> None:
    t = api.tenant("prims")
    with t.client() as c:
        sid = open_session(c)
        assert [s["id"] for s in c.get("/sessions").json()] == [sid]
        [container] = docker_engine.containers.list(filters={"label": f"caisson.session={sid}"})
        assert container.labels["caisson.tenant"] == t.tenant_id

        run = c.post(f"/sessions/{sid}/exec", json={"command": "echo hi; id -un; exit 3"}).json()
        assert (run["stdout"], run["exit_code"]) == ("hi\nagent\n", 3)

        assert c.put(f"/sessions/{sid}/files", params={"path": "notes/a.bin"}, content=b"\x00\x01" * 50).status_code == 200
        assert c.get(f"/sessions/{sid}/files", params={"path": "/workspace/notes/a.bin"}).content == b"\x00\x01" * 50
        missing = c.get(f"/sessions/{sid}/files", params={"path": "nope.txt"})
        assert missing.status_code == 404 and missing.json()["error"] == "not_found"

        edited = c.post(f"/sessions/{sid}/calls", json={"tool": "write_file", "args": {"path": "/workspace/x.py", "content": "x = 1\n"}})
        assert edited.json()["ok"] is True and edited.json()["decision"] in ("allow", "warn")
        denied = c.post(f"/sessions/{sid}/calls", json={"tool": "bash", "args": {"command": "rm -rf /"}}).json()
        assert denied["ok"] is False and denied["decision"] == "denied"

        schemas = c.get(f"/sessions/{sid}/tools", params={"format": "openai"}).json()
        assert any(s["function"]["name"] == "bash" for s in schemas)

        task = c.post(f"/sessions/{sid}/tasks", json={"command": "printf abc; sleep 0.3; printf def"}).json()
        first = c.get(f"/sessions/{sid}/tasks/{task['task_id']}", params={"wait": 5}).json()
        assert first["stdout"].startswith("abc")
        rest = c.get(f"/sessions/{sid}/tasks/{task['task_id']}", params={"stdout_offset": first["stdout_offset"], "wait": 5}).json()
        while rest["running"] or not (first["stdout"] + rest["stdout"]).endswith("def"):
            more = c.get(f"/sessions/{sid}/tasks/{task['task_id']}", params={"stdout_offset": rest["stdout_offset"], "wait": 2}).json()
            rest = {**more, "stdout": rest["stdout"] + more["stdout"]}
        assert first["stdout"] + rest["stdout"] == "abcdef"

        tar = tar_of({"repo/a.txt": b"alpha\n", "repo/sub/b.txt": b"beta\n"})
        assert c.post(f"/sessions/{sid}/copy-in", params={"dest": "/workspace/in"}, content=tar).status_code == 204
        assert c.get(f"/sessions/{sid}/files", params={"path": "in/repo/sub/b.txt"}).content == b"beta\n"
        out = untar(c.get(f"/sessions/{sid}/copy-out", params={"path": "/workspace/in/repo"}).content)
        assert out == {"./a.txt": b"alpha\n", "./sub/b.txt": b"beta\n"}
        root_only = c.get(f"/sessions/{sid}/copy-out", params={"path": "/etc/shadow"})   # archived as the agent
        # outside the workspace roots: refused before anything is read (archived as the agent besides)
        assert root_only.status_code == 403, root_only.text

        assert c.delete(f"/sessions/{sid}").status_code == 204
        assert c.get(f"/sessions/{sid}").json()["state"] == "closed"
        assert c.post(f"/sessions/{sid}/exec", json={"command": "true"}).status_code == 404
    assert docker_engine.containers.list(filters={"label": f"caisson.session={sid}"}) == []


def test_snapshot_and_fork(api: Api) -> None:
    t = api.tenant("snaps")
    with t.client() as c:
        sid = open_session(c)
        c.put(f"/sessions/{sid}/files", params={"path": "state.txt"}, content=b"v1")
        snap = c.post(f"/sessions/{sid}/snapshot").json()
        assert [s["id"] for s in c.get("/snapshots").json()] == [snap["id"]]
        restored = open_session(c, from_snapshot=snap["id"])
        assert c.get(f"/sessions/{restored}/files", params={"path": "state.txt"}).content == b"v1"
        forks = c.post(f"/sessions/{sid}/fork", json={"n": 2}).json()
        assert len(forks) == 2
        c.put(f"/sessions/{forks[0]['id']}/files", params={"path": "state.txt"}, content=b"fork0")
        assert c.get(f"/sessions/{forks[1]['id']}/files", params={"path": "state.txt"}).content == b"v1"
        for s in [sid, restored, *(f["id"] for f in forks)]:
            assert c.delete(f"/sessions/{s}").status_code == 204


def wait_for_pending(c: httpx.Client, timeout: float = 30) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pending = c.get("/approvals").json()
        if pending:
            found: dict[str, Any] = pending[0]
            return found
        time.sleep(0.1)
    raise AssertionError("no approval was asked for")


def call_in_thread(t: TenantKey, sid: str, args: dict[str, Any]) -> tuple[threading.Thread, dict[str, Any]]:
    box: dict[str, Any] = {}

    def run() -> None:
        with t.client() as c:
            box["result"] = c.post(f"/sessions/{sid}/calls", json={"tool": "bash", "args": args}).json()

    thread = threading.Thread(target=run)
    thread.start()
    return thread, box


def test_dangerous_call_waits_for_its_approval(api: Api) -> None:
    t = api.tenant("approve")
    with t.client() as c:
        sid = open_session(c)
        thread, box = call_in_thread(t, sid, {"command": DANGEROUS})
        pending = wait_for_pending(c)
        assert pending["tool"] == "bash" and pending["command"] == DANGEROUS and pending["session_id"] == sid
        assert thread.is_alive()                       # the call waits for the answer
        answered = c.post(f"/approvals/{pending['id']}", json={"decision": "allow_once"}).json()
        assert answered["state"] == "allow_once" and answered["approver"] == t.key_id
        thread.join(30)
        assert box["result"]["ok"] is True and box["result"]["text"].strip() == "42"
        assert box["result"]["decision"] == "approved"
        assert c.post(f"/approvals/{pending['id']}", json={"decision": "deny"}).status_code == 409

        thread, box = call_in_thread(t, sid, {"command": DANGEROUS})
        pending = wait_for_pending(c)
        c.post(f"/approvals/{pending['id']}", json={"decision": "deny", "message": "not on a Friday"})
        thread.join(30)
        assert box["result"]["ok"] is False and "not on a Friday" in box["result"]["text"]
        events = c.get("/audit", params={"session_id": sid, "tool": "bash"}).json()["items"]
        assert [e["decision"] for e in events] == ["approved", "denied"]
        assert all(e["tenant"] == t.tenant_id for e in events)
        c.delete(f"/sessions/{sid}")


def test_quotas_answer_429_with_retry_after(api: Api) -> None:
    t = api.tenant("quota", max_sessions=1, max_memory="512m", max_disk="1g", calls_per_minute=4)
    with t.client() as c:
        big = c.post("/sessions", json={"limits": {"memory": "1g"}})
        assert big.status_code == 429 and int(big.headers["Retry-After"]) > 0 and "512m" in big.json()["detail"]
        big = c.post("/sessions", json={"limits": {"disk": "2g"}})
        assert big.status_code == 429 and int(big.headers["Retry-After"]) > 0 and "1g of disk" in big.json()["detail"]
        sid = open_session(c)
        second = c.post("/sessions", json={})
        assert second.status_code == 429 and int(second.headers["Retry-After"]) > 0
        statuses = [c.post(f"/sessions/{sid}/exec", json={"command": "true"}).status_code for _ in range(5)]
        assert statuses == [200, 200, 200, 200, 429]
        limited = c.post(f"/sessions/{sid}/exec", json={"command": "true"})
        assert 0 < int(limited.headers["Retry-After"]) <= 60
        assert c.delete(f"/sessions/{sid}").status_code == 204
        assert c.post("/sessions", json={"image": "alpine:latest"}).status_code == 403
        sid = open_session(c)                          # the slot is free again
        c.delete(f"/sessions/{sid}")
    metrics = httpx.get(f"{api.url}/metrics").text
    for quota in ("memory", "disk", "sessions", "calls_per_minute"):
        assert f'caisson_quota_refusals_total{{quota="{quota}",tenant="{t.tenant_id}"}}' in metrics


@pytest.mark.anyio
async def test_a_sessions_disk_is_what_it_asks_within_its_tenants_max_disk(
    sqlite_api: Api, docker_engine: docker.DockerClient
) -> None:
    """Not asked, a session's disk limit is the tenant's max_disk; asked, the size asked. The
    client refuses limits the API does not take rather than open the session without them."""
    api = sqlite_api
    t = api.tenant("disk", max_disk="1g")
    sizes = {}
    with t.client() as c:
        for asked in (None, "256m"):
            sid = open_session(c, **({"limits": {"disk": asked}} if asked else {}))
            [container] = docker_engine.containers.list(filters={"label": f"caisson.session={sid}"})
            sizes[asked] = container.attrs["HostConfig"]["StorageOpt"]["size"]
            c.delete(f"/sessions/{sid}")
    assert sizes == {None: "1g", "256m": "256m"}

    async with RemoteRuntime(api.url, t.token) as rt:
        with pytest.raises(CaissonError) as refused:
            await rt.open_session(limits={"disk": "256m", "nofile": 100})
    assert "limits.nofile" in str(refused.value), refused.value


def test_body_size_limit(api: Api) -> None:
    t = api.tenant("body")
    with t.client() as c:
        huge = {"tool": "bash", "args": {"command": "x" * (17 * 1024 * 1024)}}
        r = c.post("/sessions/s-any/calls", json=huge)
        assert r.status_code == 413

        def chunks() -> Any:                           # no Content-Length: counted as it arrives
            for _ in range(18):
                yield b"x" * (1024 * 1024)

        assert c.post("/sessions", content=chunks(), headers={"content-type": "application/json"}).status_code == 413
    records = t.client().get("/audit/requests").json()
    assert [r["status"] for r in records][-2:] == [413, 413]


def test_requests_are_logged_with_tenant_and_key(api: Api) -> None:
    t = api.tenant("log")
    with t.client() as c:
        c.get("/sessions")
        c.get("/approvals")
        records = c.get("/audit/requests").json()
    assert [(r["method"], r["path"], r["status"]) for r in records[:2]] == [("GET", "/sessions", 200), ("GET", "/approvals", 200)]
    assert {(r["tenant_id"], r["key_id"]) for r in records} == {(t.tenant_id, t.key_id)}


def test_state_survives_a_restart(api: Api, tmp_path_factory: Any) -> None:
    """Tenants and keys live in the store: a new server process on the same database knows
    them. A session another live server holds stays open; sessions of a server that is gone
    (its process ended without closing them) are marked closed when a server starts."""
    from tests.server.conftest import start_server

    t = api.tenant("restart")
    with t.client() as c:
        sid = open_session(c)
    db = api.server.hosted.settings.db or f"sqlite:///{api.server.hosted.settings.state_dir}/server.sqlite3"
    gone = _dead_pid()
    store = Store(database_url(db, ""))
    left = SessionInfo(id="s-left-behind", tenant_id=t.tenant_id, image=None, profile="caisson", memory="1g",
                       state="open", created=time.time())
    leave_session(store, left, f"{socket.gethostname()}:{gone}:1/dead", None)
    store.close()
    other = start_server(tmp_path_factory.mktemp("restart"), api.server.hosted.settings.image or "", db=db)
    try:
        assert other.hosted.admin_token is None        # the store has an admin key already
        with httpx.Client(base_url=other.url, headers=t.headers) as c2:
            assert c2.get(f"/sessions/{sid}").json()["state"] == "open"
            assert c2.get("/sessions/s-left-behind").json()["state"] == "closed"
    finally:
        other.stop()
    with t.client() as c:
        c.delete(f"/sessions/{sid}")


def _dead_pid() -> int:
    """The pid of a process that has ended."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_unanswered_approval_is_a_deny(sandbox_image: str, tmp_path_factory: Any) -> None:
    from tests.server.conftest import start_server

    server = start_server(tmp_path_factory.mktemp("approval-timeout"), sandbox_image, approval_timeout=1.5)
    try:
        assert server.hosted.admin_token
        api = Api(server.url, server.hosted.admin_token, "sqlite", server)
        t = api.tenant("timeout")
        with t.client() as c:
            sid = open_session(c)
            started = time.monotonic()
            result = c.post(f"/sessions/{sid}/calls", json={"tool": "bash", "args": {"command": DANGEROUS}}).json()
            assert 1.5 <= time.monotonic() - started < 10
            assert result["ok"] is False and result["decision"] == "denied" and "No approval within" in result["text"]
            [expired] = c.get("/approvals", params={"state": "expired"}).json()
            assert c.post(f"/approvals/{expired['id']}", json={"decision": "allow_once"}).status_code == 409
    finally:
        server.stop()


def test_a_session_whose_container_ended_is_closed(sqlite_api: Api, docker_engine: docker.DockerClient) -> None:
    t = sqlite_api.tenant("ended", max_sessions=1)
    with t.client() as c:
        sid = open_session(c)
        for container in docker_engine.containers.list(filters={"label": f"caisson.session={sid}"}):
            container.kill()
        gone = c.post(f"/sessions/{sid}/exec", json={"command": "true"})
        assert gone.status_code == 410 and "open a new one" in gone.json()["detail"]
        # Closed within seconds (by the engine's death event or the call that met it): a busy
        # machine may take a moment, so the test waits with a generous margin.
        deadline = time.monotonic() + 30
        while c.get(f"/sessions/{sid}").json()["state"] != "closed" and time.monotonic() < deadline:
            time.sleep(0.2)
        assert c.get(f"/sessions/{sid}").json()["state"] == "closed"
        again = open_session(c)                        # its quota slot is free again
        assert c.delete(f"/sessions/{again}").status_code == 204


def test_a_call_waiting_for_approval_ends_with_its_session(api: Api, docker_engine: docker.DockerClient) -> None:
    """However its session ends (its tenant closes it, its container is killed from outside),
    a call waiting for an approval ends then, denied, not at the approval timeout (60 s here);
    the approval can no longer be given."""
    t = api.tenant("ends-waiting")
    ended: dict[str, float] = {}
    with t.client() as c:
        for how in ("closed by its tenant", "container killed"):
            sid = open_session(c)
            thread, box = call_in_thread(t, sid, {"command": DANGEROUS})
            pending = wait_for_pending(c)
            started = time.monotonic()
            if how == "closed by its tenant":
                assert c.delete(f"/sessions/{sid}").status_code == 204
            else:
                for container in docker_engine.containers.list(filters={"label": f"caisson.session={sid}"}):
                    container.kill()
            thread.join(30)
            ended[how] = time.monotonic() - started
            assert not thread.is_alive(), how
            result = box["result"]
            assert result["decision"] == "denied" and "its session was closed" in result["text"], (how, result)
            assert c.post(f"/approvals/{pending['id']}", json={"decision": "allow_once"}).status_code == 409
    print(f"a call waiting for approval ended after its session: {', '.join(f'{k} {v:.1f} s' for k, v in ended.items())}")


def test_tls_and_a_new_admin_key(sqlite_api: Api, sandbox_image: str, tmp_path: Path) -> None:
    """``--ssl-certfile/--ssl-keyfile`` serve HTTPS; ``--new-admin-key`` prints a further admin
    key for the same database (the way back from a lost one)."""
    from tests.server.conftest import start_server

    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True,
    )
    t = sqlite_api.tenant("tls")
    db = f"sqlite:///{sqlite_api.server.hosted.settings.state_dir}/server.sqlite3"
    server = start_server(tmp_path, sandbox_image, db=db, ssl_certfile=str(cert), ssl_keyfile=str(key), new_admin_key=True)
    try:
        assert server.url.startswith("https://") and server.hosted.admin_token
        with httpx.Client(base_url=server.url, verify=ssl.create_default_context(cafile=str(cert))) as c:
            names = {x["name"] for x in c.get("/tenants", headers={"Authorization": f"Bearer {server.hosted.admin_token}"}).json()}
            assert any(n.startswith("tls-") for n in names)
            assert c.get("/sessions", headers=t.headers).status_code == 200
        with pytest.raises(httpx.TransportError):              # plain HTTP gets no answer there
            httpx.get(server.url.replace("https://", "http://") + "/healthz", timeout=5)
    finally:
        server.stop()


def test_session_quota_holds_under_concurrent_opens(api: Api) -> None:
    t = api.tenant("race", max_sessions=2)
    statuses: list[int] = []
    made: list[str] = []

    def open_one() -> None:
        with t.client() as c:
            r = c.post("/sessions", json={})
            statuses.append(r.status_code)
            if r.status_code == 201:
                made.append(r.json()["id"])

    threads = [threading.Thread(target=open_one) for _ in range(5)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(120)
    assert sorted(statuses) == [201, 201, 429, 429, 429]
    with t.client() as c:
        for sid in made:
            assert c.delete(f"/sessions/{sid}").status_code == 204


def test_a_tenant_may_be_given_or_refused_gvisor_and_network(api: Api) -> None:
    """The tenant's quotas decide a session's isolation: gVisor for every session, on
    request, or never; a network only where allowed. A refused request is 403, not a
    session opened other than asked."""

    def kernel(key: TenantKey, sid: str) -> str:
        # dmesg is dangerous to the policy: the tenant's approver lets it run.
        with key.client() as c, approving(key):
            ran = c.post(f"/sessions/{sid}/exec", json={"command": "dmesg 2>&1 | head -1"}).json()
            c.delete(f"/sessions/{sid}")
        return str(ran["stdout"])

    always = api.tenant("gvisor-always", gvisor="always")
    with always.client() as c:
        assert "gVisor" in kernel(always, open_session(c))  # not asked for: the tenant's sessions all get it
    allowed = api.tenant("gvisor-allowed")
    with allowed.client() as c:
        assert "gVisor" in kernel(allowed, open_session(c, gvisor=True))
        assert "gVisor" not in kernel(allowed, open_session(c))
        network = c.post("/sessions", json={"network": True})
        assert network.status_code == 403 and "network" in network.json()["detail"]
        assert c.get("/sessions").json() == []
    never = api.tenant("gvisor-never", gvisor="never", network=True)
    with never.client() as c:
        refused = c.post("/sessions", json={"gvisor": True})
        assert refused.status_code == 403 and "gVisor" in refused.json()["detail"]
        sid = open_session(c, network=True)
        links = c.post(f"/sessions/{sid}/exec", json={"command": "ls /sys/class/net"}).json()["stdout"].split()
        assert "eth0" in links, links  # Docker's bridge, beside lo
        assert "gVisor" not in kernel(never, sid)
        sid = open_session(c)
        assert c.post(f"/sessions/{sid}/exec", json={"command": "ls /sys/class/net"}).json()["stdout"].split() == ["lo"]
        c.delete(f"/sessions/{sid}")
