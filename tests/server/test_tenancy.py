"""Tenant B attacks tenant A's ids: every resource, every route that takes it. Each must answer
404 (exactly as an id that does not exist), leave A's resource as it was, and be noted."""

from __future__ import annotations

from typing import Any

import httpx

from tests.server.harness import Api, tar_of
from tests.server.test_api import DANGEROUS, call_in_thread, open_session, wait_for_pending


def test_other_tenants_ids_answer_404(api: Api) -> None:
    a, b = api.tenant("alice"), api.tenant("bob")
    with a.client() as ca, b.client() as cb:
        sid = open_session(ca)
        own = open_session(cb)
        task = ca.post(f"/sessions/{sid}/tasks", json={"command": "sleep 60"}).json()["task_id"]
        snap = ca.post(f"/sessions/{sid}/snapshot").json()["id"]
        call_id = ca.post(f"/sessions/{sid}/calls", json={"tool": "calculate", "args": {"expression": "1+1"}}).json()["call_id"]
        waiting, box = call_in_thread(a, sid, {"command": DANGEROUS})
        approval = wait_for_pending(ca)["id"]

        attempts: list[tuple[str, str, dict[str, Any]]] = [
            ("GET", f"/sessions/{sid}", {}),
            ("DELETE", f"/sessions/{sid}", {}),
            ("POST", f"/sessions/{sid}/exec", {"json": {"command": "echo pwned > /workspace/p"}}),
            ("POST", f"/sessions/{sid}/calls", {"json": {"tool": "bash", "args": {"command": "echo pwned"}}}),
            ("GET", f"/sessions/{sid}/files", {"params": {"path": "/etc/hostname"}}),
            ("PUT", f"/sessions/{sid}/files", {"params": {"path": "p"}, "content": b"pwned"}),
            ("POST", f"/sessions/{sid}/copy-in", {"params": {"dest": "/workspace"}, "content": tar_of({"p": b"x"})}),
            ("GET", f"/sessions/{sid}/copy-out", {"params": {"path": "/workspace"}}),
            ("GET", f"/sessions/{sid}/tools", {}),
            ("POST", f"/sessions/{sid}/snapshot", {}),
            ("POST", f"/sessions/{sid}/fork", {"json": {"n": 1}}),
            ("POST", f"/sessions/{sid}/exec-stream", {"json": {"command": "echo pwned"}}),
            ("GET", f"/sessions/{sid}/tasks", {}),
            ("POST", f"/sessions/{sid}/tasks", {"json": {"command": "echo pwned"}}),
            ("GET", f"/sessions/{sid}/tasks/{task}", {}),
            ("GET", f"/sessions/{sid}/tasks/{task}/stream", {}),
            ("DELETE", f"/sessions/{sid}/tasks/{task}", {}),
            # A's task id through B's own session: task ids name nothing outside their session.
            ("GET", f"/sessions/{own}/tasks/{task}", {}),
            ("GET", f"/v1/sessions/{sid}/stat", {"params": {"path": "/workspace"}}),
            ("GET", f"/v1/sessions/{sid}/range", {"params": {"path": "/etc/hostname"}}),
            ("GET", f"/v1/sessions/{sid}/dir", {"params": {"path": "/workspace"}}),
            ("GET", f"/v1/sessions/{sid}/walk", {"params": {"path": "/workspace"}}),
            ("POST", f"/v1/sessions/{sid}/mkdir", {"json": {"path": "/workspace/pwned"}}),
            ("DELETE", f"/v1/sessions/{sid}/files", {"params": {"path": "/workspace/pwned", "missing_ok": True}}),
            ("POST", f"/v1/sessions/{sid}/rename", {"json": {"src": "/workspace", "dst": "/tmp/moved"}}),
            ("GET", f"/v1/sessions/{sid}/diff", {}),
            ("GET", f"/v1/sessions/{sid}/ping", {}),
            ("POST", f"/v1/sessions/{sid}/tasks/{task}/stdin", {"content": b"pwned"}),
            ("POST", f"/v1/sessions/{sid}/tasks/{task}/wait", {"params": {"timeout": 0}}),
            ("POST", f"/v1/sessions/{sid}/tasks/{task}/signal", {"json": {"signal": "KILL"}}),
            ("POST", "/sessions", {"json": {"from_snapshot": snap}}),
            ("GET", f"/approvals/{approval}", {}),
            ("POST", f"/approvals/{approval}", {"json": {"decision": "allow_session"}}),
            ("GET", f"/audit/calls/{call_id}", {}),
            ("GET", "/audit", {"params": {"session_id": sid}}),
        ]
        answers = {f"{m} {p}": cb.request(m, p, **kw).status_code for m, p, kw in attempts}
        # Signalling A's task id through B's own session reaches nothing either (not noted: B's session).
        answers[f"POST /v1/sessions/{own}/tasks/{task}/signal"] = cb.post(
            f"/v1/sessions/{own}/tasks/{task}/signal", json={"signal": "KILL"}
        ).status_code
        wrong = {k: v for k, v in answers.items() if v != 404}
        print(f"cross-tenant attempts: {len(answers)}, answered other than 404: {len(wrong)} {wrong}")
        assert wrong == {}

        # Nothing of A's was touched, and A's ids work for A.
        assert ca.get(f"/sessions/{sid}").json()["state"] == "open"
        assert ca.get(f"/sessions/{sid}/tasks/{task}").json()["running"] is True
        assert ca.get(f"/approvals/{approval}").json()["state"] == "pending"
        assert ca.get(f"/audit/calls/{call_id}").json()["tool"] == "calculate"
        assert ca.get(f"/sessions/{sid}/files", params={"path": "p"}).status_code == 404
        assert ca.get(f"/v1/sessions/{sid}/stat", params={"path": "/workspace"}).json()["type"] == "dir"
        assert ca.get(f"/v1/sessions/{sid}/stat", params={"path": "/workspace/pwned"}).json()["exists"] is False
        assert {s["id"] for s in cb.get("/sessions").json()} == {own}
        assert cb.get("/snapshots").json() == [] and cb.get("/approvals").json() == []
        assert all(e["tenant"] == b.tenant_id for e in cb.get("/audit").json()["items"])

        # B's attempts are in the request log, flagged; A's log has none of them.
        noted = [r for r in cb.get("/audit/requests", params={"limit": 1000}).json() if r["note"].startswith("cross-tenant")]
        assert len(noted) >= len(attempts) - 2 and all(r["key_id"] == b.key_id for r in noted)
        assert all(r["tenant_id"] == a.tenant_id for r in ca.get("/audit/requests", params={"limit": 1000}).json())

        ca.post(f"/approvals/{approval}", json={"decision": "deny"})
        waiting.join(30)
        assert box["result"]["decision"] == "denied"
        for c, s in ((ca, sid), (cb, own)):
            assert c.delete(f"/sessions/{s}").status_code == 204


def test_unknown_ids_answer_404_too(sqlite_api: Api) -> None:
    """The answer to another tenant's id is the answer to an id that never existed."""
    t = sqlite_api.tenant("nobody")
    with t.client() as c:
        for path, code in (("/sessions/s-000000000000", "no_such_session"), ("/approvals/ap-0000", "no_such_approval"),
                           ("/audit/calls/c-0000", "no_such_call")):
            r = c.get(path)
            assert r.status_code == 404 and r.json()["error"] == code, path
    with httpx.Client(base_url=sqlite_api.url) as anon:
        assert anon.get("/sessions/s-000000000000").status_code == 401
