"""Several replicas of `caisson serve` on one PostgreSQL control plane: a replica that starts
leaves the others' sessions open, answers for a session another replica holds with 421 and
that replica's address (which RemoteRuntime follows), and counts every replica's sessions
against the tenant's quota."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from runtime.remote import RemoteRuntime, RemoteSession
from tests.server.conftest import start_server
from tests.server.harness import Api

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
            ran = await RemoteSession(rt, sid, "caisson").exec("echo via the other replica")
            assert ran.stdout == "via the other replica\n"
    finally:
        replica.stop()
    with t.client() as a:
        # B closed its own session when it stopped; A's is untouched.
        assert a.post(f"/sessions/{sid}/exec", json={"command": "echo still"}).json()["stdout"] == "still\n"
        assert a.delete(f"/sessions/{sid}").status_code == 204
