"""What production does to a ``caisson serve`` process: a stop signal during load (the calls in
flight are answered, the sessions closed, exit 0). Each test runs the server in its own
process, started from the command line, as deployed."""

from __future__ import annotations

import contextlib
import json
import signal
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import anyio
import docker
import httpx
import pytest
from mcp.shared.exceptions import MCPError

from caisson.server import serve
from caisson.server.store import Store, database_url
from tests.loop import run_async
from tests.server.conftest import running_postgres, start_server
from tests.server.harness import Api, TenantKey
from tests.server.process import ServeProcess, fresh_database
from tests.server.test_mcp_remote import mcp_client


def _open(t: TenantKey, n: int) -> list[str]:
    with t.client() as c:
        ids = []
        for _ in range(n):
            r = c.post("/sessions", json={})
            assert r.status_code == 201, r.text
            ids.append(r.json()["id"])
        return ids


def _containers(engine: docker.DockerClient, sids: list[str]) -> list[str]:
    return [c.id for sid in sids for c in engine.containers.list(all=True, sparse=True, filters={"label": f"caisson.session={sid}"})]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stop_signal_during_load_drains_and_exits_0(
    sig: signal.Signals, sandbox_image: str, docker_engine: docker.DockerClient, tmp_path: Path
) -> None:
    """Eight clients call without pause, some calls taking 2 s; the signal comes mid-load.
    Every call the server accepted is answered (none cut, none 5xx), new connections are
    refused, the process exits 0, its sessions are closed in the store and no container of
    theirs is left."""
    server = ServeProcess(tmp_path, "--drain", "20")
    sids: list[str] = []
    try:
        t = server.tenant("drain", max_sessions=4, calls_per_minute=100_000)
        sids = _open(t, 2)
        signalled = threading.Event()
        outcomes: Counter[str] = Counter()
        reset: list[str] = []
        slow_answered_after_signal = 0
        lock = threading.Lock()

        def client(n: int) -> None:
            nonlocal slow_answered_after_signal
            sid = sids[n % len(sids)]
            slow = n % 2 == 0
            i = 0
            with httpx.Client(base_url=server.url, headers=t.headers, timeout=60) as c:
                while True:
                    command = f"sleep 2; echo {n}-{i}" if slow else f"echo {n}-{i}"
                    was_signalled = signalled.is_set()
                    try:
                        r = c.post(f"/sessions/{sid}/calls", json={"tool": "bash", "args": {"command": command}})
                    except httpx.ConnectError:
                        with lock:
                            outcomes["refused"] += 1  # the server stopped listening
                        return
                    except httpx.ReadError:
                        # Sent on a kept-alive connection as the server closed it, idle
                        # (HTTP lets it): fine if the call never ran, checked below.
                        with lock:
                            reset.append(command)
                        return
                    with lock:
                        if r.status_code == 200 and r.json()["ok"] and f"{n}-{i}" in r.json()["text"]:
                            outcomes["answered"] += 1
                            if slow and signalled.is_set() and not was_signalled:
                                slow_answered_after_signal += 1
                        else:
                            outcomes[f"{r.status_code}: {r.text[:200]}"] += 1
                    if signalled.is_set() and r.headers.get("connection") == "close":
                        return
                    i += 1

        with ThreadPoolExecutor(8) as pool:
            for n in range(8):
                pool.submit(client, n)
            time.sleep(3)
            signalled.set()
            server.signal(sig)
            started = time.monotonic()
            code = server.wait(60)
            took = time.monotonic() - started
        print(f"{sig.name} during load: exit {code} after {took:.1f} s; {dict(outcomes)}; "
              f"2-second calls in flight at the signal and answered: {slow_answered_after_signal}")
        assert code == 0, server.stderr()[-3000:]
        assert set(outcomes) <= {"answered", "refused"}, outcomes
        store = Store(database_url(None, tmp_path))
        try:
            states = {sid: run_async(lambda sid=sid: store.session(sid)) for sid in sids}
            # The store is the server's audit: every call that ran, answered or not.
            audited = run_async(lambda: store.audit(None, limit=100_000))
        finally:
            store.close()
        ran = {json.loads(event.preview)["command"] for _, event in audited}
        # Audited once: with the store answering throughout, nothing went to the local log.
        assert not (tmp_path / "audit.jsonl").exists()
        print(f"sent on a connection closed at the stop: {len(reset)}, of which ran: {len(ran.intersection(reset))}")
        assert outcomes["answered"] <= len(ran)
        assert not ran.intersection(reset)
        assert outcomes["answered"] > 8 and slow_answered_after_signal >= 1
        assert _containers(docker_engine, sids) == []
        assert {sid: info.state if info else None for sid, info in states.items()} == dict.fromkeys(sids, "closed")
    finally:
        server.stop()
        for cid in _containers(docker_engine, sids):
            docker_engine.containers.get(cid).remove(force=True)


def test_a_stop_may_hand_the_sessions_over(sandbox_image: str, docker_engine: docker.DockerClient, tmp_path: Path) -> None:
    """``--on-stop hand-over``: SIGTERM leaves the sessions running and open; the server
    started again takes them over, files and running task included."""
    server = ServeProcess(tmp_path, "--on-stop", "hand-over")
    sids: list[str] = []
    try:
        t = server.tenant("hand-over", max_sessions=2)
        sids = _open(t, 1)
        with t.client() as c:
            assert c.put(f"/sessions/{sids[0]}/files", params={"path": "a.txt"}, content=b"handed").status_code == 200
            task = c.post(f"/sessions/{sids[0]}/tasks", json={"command": "sleep 3; echo done"}).json()["task_id"]
        server.signal(signal.SIGTERM)
        assert server.wait(60) == 0, server.stderr()[-3000:]
        assert len(_containers(docker_engine, sids)) == 1
        again = ServeProcess(tmp_path, "--on-stop", "hand-over", admin_token=server.admin_token)
        try:
            with httpx.Client(base_url=again.url, headers=t.headers, timeout=60) as c:
                assert c.get(f"/sessions/{sids[0]}").json()["state"] == "open"
                assert c.get(f"/sessions/{sids[0]}/files", params={"path": "a.txt"}).content == b"handed"
                out = c.get(f"/sessions/{sids[0]}/tasks/{task}", params={"wait": 10}).json()
                while out["running"]:
                    out = c.get(f"/sessions/{sids[0]}/tasks/{task}", params={"wait": 10}).json()
                assert c.get(f"/sessions/{sids[0]}/tasks/{task}").json()["stdout"] == "done\n"
                assert c.delete(f"/sessions/{sids[0]}").status_code == 204
        finally:
            again.stop()
        assert _containers(docker_engine, sids) == []
    finally:
        server.stop()
        for cid in _containers(docker_engine, sids):
            docker_engine.containers.get(cid).remove(force=True)


def _audited(url: str, t: TenantKey) -> list[str]:
    """Every call id in the tenant's audit, page by page."""
    ids: list[str] = []
    cursor = None
    with httpx.Client(base_url=url, headers=t.headers, timeout=60) as c:
        while True:
            page = c.get("/audit", params={"limit": 500, **({"cursor": cursor} if cursor else {})})
            assert page.status_code == 200, page.text
            ids += [e["call_id"] for e in page.json()["items"]]
            cursor = page.json()["next_cursor"]
            if cursor is None:
                return ids


@pytest.mark.parametrize("store", ["sqlite", "postgres"])
def test_kill_9_during_load_loses_no_answered_call_from_the_audit(
    store: str, request: pytest.FixtureRequest, sandbox_image: str, docker_engine: docker.DockerClient, tmp_path: Path
) -> None:
    """Fifty clients call without pause; the server is killed with SIGKILL mid-load. A server
    started again on the same store has, in its audit, every call whose answer reached a
    client: the event was committed before the answer left."""
    db = fresh_database(request.getfixturevalue("postgres_url")) if store == "postgres" else None
    server = ServeProcess(tmp_path, db=db)
    sids: list[str] = []
    try:
        t = server.tenant("kill-9", max_sessions=5, calls_per_minute=1_000_000)
        sids = _open(t, 5)
        answered: list[str] = []
        failures: Counter[str] = Counter()
        killed = threading.Event()

        def client(n: int) -> None:
            with httpx.Client(base_url=server.url, headers=t.headers, timeout=60) as c:
                i = 0
                while not killed.is_set():
                    try:
                        r = c.post(f"/sessions/{sids[n % 5]}/calls",
                                   json={"tool": "bash", "args": {"command": f"echo {n}-{i}"}})
                    except httpx.TransportError:
                        return  # the server is gone: this call was never answered
                    if r.status_code == 200 and r.json()["ok"]:
                        answered.append(r.json()["call_id"])
                    else:
                        failures[f"{r.status_code} {r.text[:100]}"] += 1
                    i += 1

        with ThreadPoolExecutor(50) as pool:
            for n in range(50):
                pool.submit(client, n)
            time.sleep(6)
            server.kill()
            killed.set()
        assert not failures, failures
        again = ServeProcess(tmp_path, db=db, admin_token=server.admin_token)
        try:
            audited = set(_audited(again.url, t))
        finally:
            again.stop()
        missing = [c for c in answered if c not in audited]
        print(f"kill -9 during load of 50 clients ({store}): {len(answered)} calls answered, "
              f"{len(audited)} in the audit after the restart, {len(missing)} answered but missing")
        assert len(answered) > 50
        assert missing == []
    finally:
        server.stop()
        for cid in _containers(docker_engine, sids):
            docker_engine.containers.get(cid).remove(force=True)


@pytest.mark.parametrize("store", ["sqlite", "postgres"])
def test_sessions_outlive_a_killed_server(
    store: str, request: pytest.FixtureRequest, sandbox_image: str, docker_engine: docker.DockerClient, tmp_path: Path
) -> None:
    """``kill -9`` with two sessions open, a background task running in one, a dangerous call
    waiting for its approval; one session's container is then killed from outside. The server
    started again re-attaches the session whose container lives (its files, its task and the
    task's kept output), closes the other (its seat free), and the approval of the call that
    died with the process is expired with a reason: answering it is refused."""
    db = fresh_database(request.getfixturevalue("postgres_url")) if store == "postgres" else None
    server = ServeProcess(tmp_path, db=db)
    sids: list[str] = []
    try:
        t = server.tenant("outlive", max_sessions=2)
        sids = _open(t, 2)
        kept, lost = sids
        with t.client() as c:
            assert c.put(f"/sessions/{kept}/files", params={"path": "kept.txt"}, content=b"before the kill").status_code == 200
            task = c.post(f"/sessions/{kept}/tasks", json={"command": "echo started; sleep 2; echo after"}).json()["task_id"]
            waiting = threading.Thread(target=lambda: _call_quietly(t, kept, 'python3 -c "print(6 * 7)"'), daemon=True)
            waiting.start()
            deadline = time.monotonic() + 30
            while not (pending := c.get("/approvals").json()):
                assert time.monotonic() < deadline, "the dangerous call did not reach the approval queue"
                time.sleep(0.2)
        server.kill()
        for container in docker_engine.containers.list(filters={"label": f"caisson.session={lost}"}):
            container.kill()
        again = ServeProcess(tmp_path, db=db, admin_token=server.admin_token)
        try:
            with httpx.Client(base_url=again.url, headers=t.headers, timeout=60) as c:
                assert c.get(f"/sessions/{kept}").json()["state"] == "open"
                assert c.get(f"/sessions/{lost}").json()["state"] == "closed"
                assert c.get(f"/sessions/{kept}/files", params={"path": "kept.txt"}).content == b"before the kill"
                ran = c.post(f"/sessions/{kept}/calls", json={"tool": "bash", "args": {"command": "echo alive"}}).json()
                assert ran["ok"] and "alive" in ran["text"]
                out = c.get(f"/sessions/{kept}/tasks/{task}", params={"wait": 10}).json()
                while out["running"]:
                    out = c.get(f"/sessions/{kept}/tasks/{task}", params={"wait": 10}).json()
                full = c.get(f"/sessions/{kept}/tasks/{task}").json()
                assert full["stdout"] == "started\nafter\n" and full["exit_code"] == 0
                [expired] = [a for a in c.get("/approvals", params={"state": "expired"}).json() if a["id"] == pending[0]["id"]]
                assert "stopped before an answer" in expired["message"]
                assert c.post(f"/approvals/{expired['id']}", json={"decision": "allow_once"}).status_code == 409
                # The lost session's seat is free: a second session opens within the quota of 2.
                opened = c.post("/sessions", json={})
                assert opened.status_code == 201, opened.text
                sids.append(opened.json()["id"])
                for sid in (kept, opened.json()["id"]):
                    assert c.delete(f"/sessions/{sid}").status_code == 204
            print(f"kill -9 ({store}): 1 session re-attached with its file and task, 1 whose container died closed, "
                  f"1 pending approval expired")
        finally:
            again.stop()
        assert _containers(docker_engine, sids) == []
    finally:
        server.stop()
        for cid in _containers(docker_engine, sids):
            docker_engine.containers.get(cid).remove(force=True)


def _call_quietly(t: TenantKey, sid: str, command: str) -> None:
    """A call whose server will be killed under it."""
    with contextlib.suppress(httpx.TransportError), t.client() as c:
        c.post(f"/sessions/{sid}/calls", json={"tool": "bash", "args": {"command": command}})


def test_a_container_killed_from_outside_is_noticed_at_once(api: Api, docker_engine: docker.DockerClient) -> None:
    """No call needed: the engine's event stream tells the server, which closes the session
    and frees its seat within seconds (a poll would take its interval); its calls then answer
    410 with the reason."""
    t = api.tenant("killed-outside", max_sessions=1)
    [sid] = _open(t, 1)
    with t.client() as c:
        [container] = docker_engine.containers.list(filters={"label": f"caisson.session={sid}"})
        container.kill()
        killed = time.monotonic()
        while c.get(f"/sessions/{sid}").json()["state"] != "closed":
            assert time.monotonic() - killed < 10, "the session was not closed within 10 s of its container's death"
            time.sleep(0.05)
        noticed = time.monotonic() - killed
        gone = c.post(f"/sessions/{sid}/calls", json={"tool": "bash", "args": {"command": "true"}})
        assert gone.status_code == 410 and "container stopped" in gone.json()["detail"], gone.text
        again = c.post("/sessions", json={})  # the seat is free
        assert again.status_code == 201, again.text
        assert c.delete(f"/sessions/{again.json()['id']}").status_code == 204
    print(f"a container killed from outside ({api.store}): session closed {noticed:.2f} s later")


def test_a_store_outage_answers_503_problems_then_recovers(
    sandbox_image: str, docker_engine: docker.DockerClient, tmp_path: Path
) -> None:
    """PostgreSQL stopped under a running server: /readyz fails, requests that need the store
    (lists, opens, tool calls, whose audit event cannot be stored) answer 503 problem bodies
    with Retry-After, never a bare 500; /healthz still answers. The database back, both
    recover without a restart, and a call that ran during the outage is in the audit (and was
    written to the replica's local log at once, for a process that dies before the store is back)."""
    with running_postgres(docker_engine) as (postgres, url):
        server = start_server(tmp_path, sandbox_image, db=url)
        try:
            assert server.hosted.admin_token
            api = Api(server.url, server.hosted.admin_token, "postgres", server)
            t = api.tenant("outage")
            [sid] = _open(t, 1)
            with t.client() as c:
                time.sleep(5.5)  # the key and tenant look-ups cached afresh: the call below runs
                assert c.get("/readyz").status_code == 200 and c.get(f"/sessions/{sid}").status_code == 200
                postgres.get_wrapped_container().kill()
                answers = {
                    "call": c.post(f"/sessions/{sid}/calls", json={
                        "tool": "write_file", "args": {"path": "/workspace/during.txt", "content": "during"}}),
                    "readyz": c.get("/readyz"),
                    "list": c.get("/sessions"),
                    "open": c.post("/sessions", json={}),
                }
                print("during the outage:", {k: (r.status_code, r.headers.get("content-type")) for k, r in answers.items()})
                for what, r in answers.items():
                    assert r.status_code == 503, (what, r.text)
                    assert r.headers["content-type"].startswith(("application/problem+json", "application/json")), what
                    assert r.json()["detail"] and int(r.headers["retry-after"]) > 0, what
                assert c.get("/healthz").status_code == 200
                postgres.get_wrapped_container().start()
                deadline = time.monotonic() + 60
                while c.get("/readyz").status_code != 200:
                    assert time.monotonic() < deadline, "not ready a minute after the store came back"
                    time.sleep(0.5)
                assert c.get("/sessions").status_code == 200
                ran = c.post(f"/sessions/{sid}/calls", json={"tool": "bash", "args": {"command": "echo after"}})
                assert ran.status_code == 200 and "after" in ran.json()["text"]
                previews = " ".join(e["preview"] for e in c.get("/audit", params={"session_id": sid}).json()["items"])
                # The call of the outage ran only if the store answered its key and tenant
                # (cached a few seconds), which its file shows; if it ran, its event reached
                # the store once back.
                ran_during = c.get(f"/sessions/{sid}/files", params={"path": "/workspace/during.txt"}).status_code == 200
                in_audit = "during.txt" in previews
                # An event the store did not take also went to the replica's own log at once.
                local = tmp_path / "audit.jsonl"
                spilled = local.exists() and "during.txt" in local.read_text()
                print(f"the call made during the outage ran: {ran_during}; in the store's audit: {in_audit}; "
                      f"in the replica's local log: {spilled}")
                assert in_audit == ran_during == spilled and "echo after" in previews
                assert c.delete(f"/sessions/{sid}").status_code == 204
        finally:
            server.stop()


def test_a_call_run_in_a_store_outage_keeps_its_record_through_a_kill(
    sandbox_image: str, docker_engine: docker.DockerClient, tmp_path: Path
) -> None:
    """PostgreSQL stopped, a call runs (its key and tenant cached) and waits for the store to
    take its event; the server is killed with SIGKILL before the store is back. The event never
    reached the store, but the replica wrote it to its local audit log when the store refused."""
    with running_postgres(docker_engine) as (postgres, url):
        server = ServeProcess(tmp_path, db=url)
        sid = ""
        try:
            t = server.tenant("crash")
            [sid] = _open(t, 1)
            with t.client() as c:
                time.sleep(5.5)  # the key and tenant look-ups cached afresh: the call below runs
                assert c.get(f"/sessions/{sid}").status_code == 200
                postgres.get_wrapped_container().kill()
                with contextlib.suppress(httpx.TransportError):
                    c.post(f"/sessions/{sid}/calls", json={
                        "tool": "write_file", "args": {"path": "/workspace/crash.txt", "content": "ran"}}, timeout=5)
            server.kill()
            [container] = docker_engine.containers.list(filters={"label": f"caisson.session={sid}"})
            ran = container.exec_run(["cat", "/workspace/crash.txt"]).output == b"ran"
            local = tmp_path / "audit.jsonl"
            kept = local.exists() and "crash.txt" in local.read_text()
            print(f"a call run in a store outage, then kill -9: ran {ran}; in the replica's local log: {kept}")
            assert ran and kept
        finally:
            server.stop()
            for cid in _containers(docker_engine, [sid]):
                docker_engine.containers.get(cid).remove(force=True)


def test_two_replicas_serve_one_audit_and_take_over_a_killed_ones_sessions(
    postgres_url: str, sandbox_image: str, docker_engine: docker.DockerClient, tmp_path: Path
) -> None:
    """Two server processes on one PostgreSQL: a tenant's audit is the same from either (it
    lives in the store), and when one is killed with SIGKILL the other takes over its session
    at its next beat (10 s) and serves it, files and all."""
    db = fresh_database(postgres_url)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = ServeProcess(tmp_path / "a", db=db)
    b = ServeProcess(tmp_path / "b", db=db, admin_token=a.admin_token)
    sids: list[str] = []
    try:
        t = a.tenant("two-replicas")
        with t.client() as on_a:
            sid = on_a.post("/v1/sessions", json={}).json()["id"]
            sids.append(sid)
            for n in range(5):
                assert on_a.post(f"/v1/sessions/{sid}/calls", json={"tool": "bash", "args": {"command": f"echo {n}"}}).json()["ok"]
            assert on_a.put(f"/v1/sessions/{sid}/files", params={"path": "f.txt"}, content=b"on a").status_code == 200
            from_a = on_a.get("/v1/audit").json()["items"]
        with httpx.Client(base_url=b.url, headers=t.headers, timeout=60) as on_b:
            from_b = on_b.get("/v1/audit").json()["items"]
            assert len(from_a) == 5 and from_a == from_b
            a.kill()
            deadline = time.monotonic() + 40
            while (r := on_b.get(f"/v1/sessions/{sid}/files", params={"path": "f.txt"})).status_code != 200:
                assert r.status_code in (421, 404), r.text
                assert time.monotonic() < deadline, f"replica B did not take the session over: {r.status_code} {r.text}"
                time.sleep(0.5)
            took = 40 - (deadline - time.monotonic())
            assert r.content == b"on a"
            assert on_b.post(f"/v1/sessions/{sid}/calls", json={"tool": "bash", "args": {"command": "echo on b"}}).json()["ok"]
            print(f"the same audit from both replicas ({len(from_a)} events); B served A's session {took:.1f} s after A's kill")
            assert on_b.delete(f"/v1/sessions/{sid}").status_code == 204
    finally:
        a.stop()
        b.stop()
        for cid in _containers(docker_engine, sids):
            docker_engine.containers.get(cid).remove(force=True)


@pytest.mark.anyio
async def test_an_mcp_call_is_not_answered_as_done_before_its_audit_is_stored(
    sandbox_image: str, docker_engine: docker.DockerClient, tmp_path: Path
) -> None:
    """Remote MCP calls are written ahead too: with the store gone, a call runs but its answer
    is an error naming the audit store, not the tool's output."""
    with running_postgres(docker_engine) as (postgres, url):
        server = start_server(tmp_path, sandbox_image, db=url)
        try:
            assert server.hosted.admin_token
            t = Api(server.url, server.hosted.admin_token, "postgres", server).tenant("mcp-outage")
            async with mcp_client(server.url, t.token) as client:
                assert not (await client.call_tool("bash", {"command": "echo before"})).is_error
                await anyio.sleep(5.5)
                # This call's key look-up is cached afresh, so the next one needs no store to start.
                assert not (await client.call_tool("bash", {"command": "echo refresh"})).is_error
                postgres.get_wrapped_container().kill()
                with anyio.fail_after(60):
                    try:
                        during = await client.call_tool("bash", {"command": "echo during"})
                        failed, text = during.is_error, str(during.content[0].text)  # type: ignore[union-attr]
                    except MCPError as exc:
                        failed, text = True, str(exc)
                print(f"an MCP call with the store gone: error={failed}: {text[:200]}")
                assert failed and "audit store" in text
                postgres.get_wrapped_container().start()
        finally:
            server.stop()


def test_a_paused_container_is_not_taken_for_dead(
    sandbox_image: str, docker_engine: docker.DockerClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A snapshot pauses the container while the engine commits it: sweeps running meanwhile
    (here every 0.2 s) leave the session open."""
    monkeypatch.setattr(serve, "SWEEP_EVERY", 0.2)
    server = start_server(tmp_path, sandbox_image)
    try:
        assert server.hosted.admin_token
        t = Api(server.url, server.hosted.admin_token, "sqlite", server).tenant("paused")
        [sid] = _open(t, 1)
        [container] = docker_engine.containers.list(filters={"label": f"caisson.session={sid}"})
        container.pause()
        time.sleep(2)  # ten sweeps
        container.unpause()
        with t.client() as c:
            assert c.get(f"/v1/sessions/{sid}").json()["state"] == "open"
            assert c.post(f"/v1/sessions/{sid}/exec", json={"command": "echo still"}).json()["stdout"] == "still\n"
            assert c.delete(f"/v1/sessions/{sid}").status_code == 204
    finally:
        server.stop()
