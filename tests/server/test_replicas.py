"""Several replicas of `caisson serve` on one PostgreSQL control plane: a replica that starts
leaves the others' sessions open, answers for a session another replica holds with 421 and
that replica's address (which RemoteRuntime follows), and counts every replica's sessions
against the tenant's quota."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import docker
import httpx
import pytest
import sqlalchemy as sa

from caisson.remote import RemoteRuntime, RemoteSession
from caisson.server import serve
from caisson.server.models import SessionInfo
from caisson.server.store import Store, replicas, sessions
from tests.loop import run_async
from tests.server.conftest import start_server
from tests.server.harness import Api, leave_session

pytestmark = pytest.mark.anyio


async def test_replicas_share_one_control_plane(
    postgres_api: Api, postgres_url: str, sandbox_image: str, tmp_path: Path
) -> None:
    t = postgres_api.tenant("replicas", max_sessions=2)
    with t.client() as a:
        opened = a.post("/sessions", json={})
        assert opened.status_code == 201, opened.text
        sid = opened.json()["id"]
    replica = start_server(tmp_path, sandbox_image, db=postgres_url)
    try:
        with httpx.Client(base_url=replica.url, headers=t.headers, timeout=120) as b:
            # Starting did not close the other replica's session.
            assert b.get(f"/sessions/{sid}").json()["state"] == "open"
            moved = b.post(f"/sessions/{sid}/exec", json={"command": "echo hi"})
            assert moved.status_code == 421 and postgres_api.url in moved.json()["detail"]
            assert moved.headers["location"] == f"{postgres_api.url}/sessions/{sid}/exec"
            # A session of B's own, then the quota (2) is full across both replicas.
            own = b.post("/sessions", json={})
            assert own.status_code == 201, own.text
            refused = b.post("/sessions", json={})
            assert refused.status_code == 429 and "Retry-After" in refused.headers
            with t.client() as a:
                assert a.post("/sessions", json={}).status_code == 429
            # Another tenant asking B for the session still gets 404, not its address.
            other = postgres_api.tenant("replicas-other")
            with httpx.Client(base_url=replica.url, headers=other.headers, timeout=120) as stranger:
                assert stranger.post(f"/sessions/{sid}/exec", json={"command": "true"}).status_code == 404
        async with RemoteRuntime(replica.url, t.token) as rt:
            held = RemoteSession(rt, sid, "caisson")
            ran = await held.exec("echo via the other replica")
            assert ran.stdout == "via the other replica\n"
            # Query parameters and streamed answers reach the holder too.
            await held.write_file("moved.txt", "across replicas\n")
            assert await held.read_file("moved.txt") == b"across replicas\n"
            events = [ev async for ev in held.exec_stream("echo streamed")]
            assert events[0].data == "streamed\n" and events[-1].kind == "exit"
            copied = b"".join([chunk async for chunk in held.copy_out("moved.txt")])
            assert b"across replicas" in copied
    finally:
        replica.stop()
    with t.client() as a:
        # B closed its own session when it stopped; A's is untouched.
        assert a.post(f"/sessions/{sid}/exec", json={"command": "echo still"}).json()["stdout"] == "still\n"
        assert a.delete(f"/sessions/{sid}").status_code == 204


def test_two_replicas_racing_for_the_last_seats(
    postgres_api: Api, postgres_url: str, sandbox_image: str, tmp_path: Path
) -> None:
    """Six opens at once, three on each replica, against a quota of 2: the seats are reserved
    in the shared store, so exactly two sessions open across both."""
    t = postgres_api.tenant("replica-race", max_sessions=2)
    replica = start_server(tmp_path, sandbox_image, db=postgres_url)
    try:
        urls = [postgres_api.url, replica.url] * 3
        start = threading.Barrier(len(urls))

        def open_on(url: str) -> httpx.Response:
            with httpx.Client(base_url=url, headers=t.headers, timeout=120) as c:
                start.wait()
                return c.post("/sessions", json={})

        with ThreadPoolExecutor(len(urls)) as pool:
            answers = list(pool.map(open_on, urls))
        codes = sorted(a.status_code for a in answers)
        print(f"6 racing opens on 2 replicas against a quota of 2: {codes.count(201)} opened, {codes.count(429)} refused")
        assert codes == [201, 201, 429, 429, 429, 429], [a.text for a in answers]
        for answer in answers:
            if answer.status_code == 201:
                holder = postgres_api.url if str(answer.url).startswith(postgres_api.url) else replica.url
                with httpx.Client(base_url=holder, headers=t.headers, timeout=120) as c:
                    assert c.delete(f"/sessions/{answer.json()['id']}").status_code == 204
        # The seats are free again: a new session opens.
        with t.client() as a:
            again = a.post("/sessions", json={})
            assert again.status_code == 201, again.text
            assert a.delete(f"/sessions/{again.json()['id']}").status_code == 204
    finally:
        replica.stop()


def test_a_replica_on_another_host_that_stopped_beating_is_gone(
    postgres_api: Api, postgres_url: str, sandbox_image: str, tmp_path: Path
) -> None:
    """Replicas on other hosts cannot be asked whether their process lives: each beats in the
    store every few seconds, and one silent for a minute is gone, its sessions closed and its
    seats free. One that beats stays, with its sessions."""
    t = postgres_api.tenant("replica-silent", max_sessions=2)
    store = Store(postgres_url)
    try:
        for name, server, seen in (("s-silent", "elsewhere:1:1/silent", time.time() - 3600),
                                   ("s-beating", "elsewhere:2:1/beating", time.time())):
            info = SessionInfo(id=name, tenant_id=t.tenant_id, image=None, profile="caisson", memory="1g",
                               state="open", created=time.time())
            leave_session(store, info, server, "http://elsewhere:1")
            run_async(lambda server=server: store.beat(server))
            with store.engine.begin() as c:
                c.execute(replicas.update().where(replicas.c.name == server).values(seen=seen))
    finally:
        store.close()
    with t.client() as a:
        assert a.post("/sessions", json={}).status_code == 429  # both seats held by the other host
    replica = start_server(tmp_path, sandbox_image, db=postgres_url)  # a starting replica looks
    try:
        with httpx.Client(base_url=replica.url, headers=t.headers, timeout=120) as b:
            assert b.get("/sessions/s-silent").json()["state"] == "closed"
            assert b.get("/sessions/s-beating").json()["state"] == "open"
            opened = b.post("/sessions", json={})  # the silent replica's seat is free again
            assert opened.status_code == 201, opened.text
            assert b.delete(f"/sessions/{opened.json()['id']}").status_code == 204
    finally:
        replica.stop()
        cleanup = Store(postgres_url)
        run_async(lambda: cleanup.close_session("s-beating"))
        cleanup.close()


def test_a_replica_taken_for_gone_closes_its_sessions(
    postgres_api: Api, postgres_url: str, sandbox_image: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other side of the heartbeat: when the others took a replica for gone (its record
    dropped, its sessions marked closed, as after a minute cut off from the database), the
    replica ends those sessions itself at its next beat instead of serving them on."""
    monkeypatch.setattr(serve, "BEAT_EVERY", 0.3)
    t = postgres_api.tenant("replica-taken-for-gone")
    replica = start_server(tmp_path, sandbox_image, db=postgres_url)
    try:
        with httpx.Client(base_url=replica.url, headers=t.headers, timeout=120) as b:
            sid = b.post("/sessions", json={}).json()["id"]
            assert b.post(f"/sessions/{sid}/exec", json={"command": "true"}).status_code == 200
            store = Store(postgres_url)
            try:
                with store.engine.begin() as c:
                    name = c.execute(sa.select(sessions.c.server).where(sessions.c.id == sid)).scalar_one()
                    c.execute(replicas.delete().where(replicas.c.name == name))
                run_async(lambda: store.close_session(sid))
            finally:
                store.close()
            engine = docker.from_env()
            deadline = time.monotonic() + 20
            while engine.containers.list(all=True, sparse=True, filters={"label": f"caisson.session={sid}"}):
                assert time.monotonic() < deadline, "the replica kept serving a session the others closed"
                time.sleep(0.2)
            engine.close()
            assert b.post(f"/sessions/{sid}/exec", json={"command": "true"}).status_code == 404
    finally:
        replica.stop()
