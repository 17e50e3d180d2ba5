"""What an operator of ``caisson serve`` sees: one access-log line per request on stderr
(tenant, key, route, status, time), and /metrics with the process's own metrics and a
latency histogram by route template and status."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx

from tests.server.harness import Api
from tests.server.process import ServeProcess


def test_access_log_and_request_metrics(sandbox_image: str, tmp_path: Path) -> None:
    server = ServeProcess(tmp_path)
    try:
        t = server.tenant("operator")
        with t.client() as c:
            sid = c.post("/sessions", json={}).json()["id"]
            for _ in range(3):
                assert c.post(f"/sessions/{sid}/calls", json={"tool": "bash", "args": {"command": "true"}}).status_code == 200
            assert c.get("/sessions/s-nope").status_code == 404
            assert c.delete(f"/sessions/{sid}").status_code == 204
        with httpx.Client(base_url=server.url) as anon:
            metrics = anon.get("/metrics").text
    finally:
        server.stop()
    lines = [json.loads(line) for line in server.stderr().splitlines() if line.startswith("{")]
    access = [e for e in lines if e.get("event") == "request"]
    calls = [e for e in access if e["route"] == "/sessions/{session_id}/calls"]
    print(f"{len(access)} access-log lines; a call's: {calls[0] if calls else None}")
    assert len(calls) == 3
    assert all(e["tenant"] == t.tenant_id and e["key"] == t.key_id and e["status"] == 200 and e["ms"] > 0 for e in calls)
    assert any(e["path"] == "/sessions/s-nope" and e["status"] == 404 and e["tenant"] == t.tenant_id for e in access)
    # Process metrics, and the histogram keyed by route template (never by a session id).
    assert re.search(r"^process_cpu_seconds_total [0-9.e+]+$", metrics, re.M)
    assert re.search(r"^process_resident_memory_bytes [0-9.e+]+$", metrics, re.M)
    count = re.search(
        r'^caisson_http_request_seconds_count\{method="POST",route="/sessions/\{session_id\}/calls",status="200"\} ([0-9.]+)$',
        metrics, re.M,
    )
    assert count and float(count.group(1)) == 3
    assert sid not in metrics


def test_an_admin_key_sees_and_filters_every_tenant_and_closes_sessions(api: Api) -> None:
    a, b = api.tenant("admin-view-a"), api.tenant("admin-view-b")
    sids = {}
    for t in (a, b):
        with t.client() as c:
            sids[t.tenant_id] = c.post("/v1/sessions", json={}).json()["id"]
            assert c.post(f"/v1/sessions/{sids[t.tenant_id]}/calls", json={"tool": "bash", "args": {"command": "true"}}).json()["ok"]
    with api.admin as admin:
        every = {s["tenant_id"] for s in admin.get("/v1/sessions").json()["items"]}
        assert {a.tenant_id, b.tenant_id} <= every
        only_a = admin.get("/v1/sessions", params={"tenant_id": a.tenant_id}).json()["items"]
        assert [s["id"] for s in only_a] == [sids[a.tenant_id]]
        audit = admin.get("/v1/audit", params={"order": "newest", "limit": 1000}).json()["items"]
        assert {a.tenant_id, b.tenant_id} <= {e["tenant"] for e in audit}
        b_audit = admin.get("/v1/audit", params={"tenant_id": b.tenant_id}).json()["items"]
        assert b_audit and {e["tenant"] for e in b_audit} == {b.tenant_id}
        requests = admin.get("/v1/audit/requests", params={"tenant_id": a.tenant_id, "limit": 1000}).json()["items"]
        assert requests and {r["tenant_id"] for r in requests} == {a.tenant_id}
        assert admin.get("/v1/approvals", params={"state": "expired", "tenant_id": a.tenant_id}).status_code == 200
        assert admin.delete(f"/v1/sessions/{sids[b.tenant_id]}").status_code == 204
        assert admin.delete("/v1/sessions/s-nope").status_code == 404
    with b.client() as c:
        assert c.get(f"/v1/sessions/{sids[b.tenant_id]}").json()["state"] == "closed"
    with a.client() as c:
        # A tenant key names no other tenant, and its lists stay its own.
        assert c.get("/v1/sessions", params={"tenant_id": b.tenant_id}).status_code == 403
        assert c.get("/v1/audit", params={"tenant_id": b.tenant_id}).status_code == 403
        assert {e["tenant"] for e in c.get("/v1/audit").json()["items"]} == {a.tenant_id}
        assert c.delete(f"/v1/sessions/{sids[a.tenant_id]}").status_code == 204
