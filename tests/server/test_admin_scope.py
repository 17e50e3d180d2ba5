"""The admin scope, attacked with a tenant key: every admin operation of the document, every
operation on another tenant's resources (by id, by guessed and dressed-up ids, by the
``tenant_id`` query parameter in every spelling, by header tricks). None may land: answered
with anything below 400, or leaving a change behind. Then the admin key itself: it sees and
filters every tenant's sessions, audit, requests and approvals, and closes a session."""

from __future__ import annotations

import secrets
from typing import Any
from urllib.parse import quote

import httpx

from tests.server.harness import Api, TenantKey, tar_of
from tests.server.test_api import DANGEROUS, call_in_thread, open_session, wait_for_pending

PWNED = "echo pwned > /workspace/pwned"
# A request body for each operation that takes one, valid enough to reach the scope check.
BODIES: dict[tuple[str, str], dict[str, Any]] = {
    ("post", "/v1/tenants"): {"json": {"name": "evil-" + secrets.token_hex(3)}},
    ("put", "/v1/tenants/{tenant_id}/quotas"): {"json": {"max_sessions": 10_000}},
    ("post", "/v1/tenants/{tenant_id}/keys"): {"json": {"label": "evil"}},
    ("post", "/v1/admin/keys"): {"json": {"label": "evil"}},
    ("post", "/v1/sessions/{session_id}/calls"): {"json": {"tool": "bash", "args": {"command": PWNED}}},
    ("post", "/v1/sessions/{session_id}/exec"): {"json": {"command": PWNED}},
    ("post", "/v1/sessions/{session_id}/exec-stream"): {"json": {"command": PWNED}},
    ("post", "/v1/sessions/{session_id}/tasks"): {"json": {"command": PWNED}},
    ("put", "/v1/sessions/{session_id}/files"): {"content": b"pwned"},
    ("post", "/v1/sessions/{session_id}/copy-in"): {"content": tar_of({"pwned": b"pwned"})},
    ("post", "/v1/sessions/{session_id}/fork"): {"json": {"n": 1}},
    ("post", "/v1/approvals/{approval_id}"): {"json": {"decision": "allow_session"}},
}
QUERY = {"path": "/workspace/secret.txt", "dest": "/workspace"}


def operations(doc: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """Every operation of the document: method, path template, and its tags and query names."""
    found = []
    for path, ops in doc["paths"].items():
        if path.startswith("/v1/"):
            for method, op in ops.items():
                found.append((method, path, op))
    return found


class Tally:
    """Counts the tries; a try landed when it was accepted, when an answer shows what only the
    victim has (its tenant id, its file's content), or when a list shows another's item."""

    def __init__(self, attacker: TenantKey, only_the_victims: list[str]) -> None:
        self.tried = 0
        self.landed: list[str] = []
        self._attacker = attacker
        self._theirs = only_the_victims

    def check(self, what: str, r: httpx.Response, own_list: bool = False) -> None:
        self.tried += 1
        # What the attacker sent may come back in an error's detail; the rest is the victim's.
        sent = f"{r.request.url} {r.request.headers} {r.request.content!r}"
        if own_list and r.status_code == 200:
            owners = {item.get("tenant_id", item.get("tenant")) for item in _items(r.json())}
            if owners - {self._attacker.tenant_id}:
                self.landed.append(f"{what}: listed {owners}")
        elif r.status_code < 400 or any(s in r.text and s not in sent for s in self._theirs):
            self.landed.append(f"{what}: {r.status_code} {r.text[:160]}")


def _items(body: Any) -> list[dict[str, Any]]:
    return list(body["items"] if isinstance(body, dict) else body)


def test_a_tenant_key_reaches_no_admin_route_and_no_other_tenant(api: Api) -> None:
    victim, attacker = api.tenant("victim"), api.tenant("attacker")
    with victim.client() as cv, attacker.client() as ca, api.admin as admin:
        sid = open_session(cv)
        waiting, box = call_in_thread(victim, sid, {"command": DANGEROUS})  # nothing answers it
        own = open_session(ca)
        assert ca.post(f"/v1/sessions/{own}/calls", json={"tool": "calculate", "args": {"expression": "2+2"}}).json()["ok"]
        marker = "victim-secret-" + secrets.token_hex(4)
        cv.put(f"/v1/sessions/{sid}/files", params={"path": "/workspace/secret.txt"}, content=marker.encode())
        task = cv.post(f"/v1/sessions/{sid}/tasks", json={"command": "sleep 300"}).json()["task_id"]
        snap = cv.post(f"/v1/sessions/{sid}/snapshot").json()["id"]
        call_id = cv.post(f"/v1/sessions/{sid}/calls", json={"tool": "calculate", "args": {"expression": "1+1"}}).json()["call_id"]
        approval = wait_for_pending(cv)["id"]
        admin_key = admin.get("/v1/keys").json()["items"][0]["id"]
        tenants_before = admin.get("/v1/tenants", params={"limit": 10_000}).json()["items"]
        keys_before = admin.get("/v1/keys", params={"limit": 10_000}).json()["items"]

        tally = Tally(attacker, [victim.tenant_id, marker])
        ids = {"tenant_id": victim.tenant_id, "session_id": sid, "task_id": task, "approval_id": approval,
               "call_id": call_id, "key_id": victim.key_id}
        doc = httpx.get(api.url + "/openapi.json").json()

        # 1. Every operation, with the victim's ids (admin operations: with the victim's tenant and key).
        for method, path, op in operations(doc):
            names = {p["name"] for p in op.get("parameters", []) if p["in"] == "query"}
            params = {k: v for k, v in {**QUERY, "tenant_id": victim.tenant_id}.items() if k in names}
            url = path.format(**ids)
            body = BODIES.get((method, path), {})
            if (method, path) == ("post", "/v1/sessions"):
                body = {"json": {"from_snapshot": snap}}
            own_list = method == "get" and "{" not in path and "admin" not in op["tags"] and "tenant_id" not in params
            tally.check(f"{method} {url} {params}", ca.request(method, url, params=params, **body), own_list)
            # The old path of the same operation.
            tally.check(f"{method} {url[3:]}", ca.request(method, url[3:], params=params, **body), own_list)

        # 2. Guessed and dressed-up ids: case, encoding, traversal, padding, another prefix.
        dressed = [sid.upper(), quote(sid, safe=""), "".join(f"%{ord(ch):02x}" for ch in sid), f"{own}/../{sid}",
                   f"{own}%2f..%2f{sid}", f"./{sid}", f"{sid}%00", f"{sid}%20", f" {sid}", f"{sid};tenant_id={victim.tenant_id}",
                   *("s-" + secrets.token_hex(n) for n in (4, 6, 8, 16))]
        for guess in dressed:
            for method, tail, body in (("get", "", {}), ("delete", "", {}), ("post", "/exec", {"json": {"command": PWNED}}),
                                       ("get", "/files", {"params": {"path": "/workspace/secret.txt"}})):
                tally.check(f"{method} session {guess!r}{tail}", ca.request(method, f"/v1/sessions/{guess}{tail}", **body))
        for guess in (approval.upper(), quote(approval, safe=""), f"{approval}%00", "a-" + secrets.token_hex(8)):
            tally.check(f"answer {guess!r}", ca.post(f"/v1/approvals/{guess}", json={"decision": "allow_once"}))
        for guess in (call_id.upper(), f"{call_id}%00", secrets.token_hex(8)):
            tally.check(f"call {guess!r}", ca.get(f"/v1/audit/calls/{guess}"))

        # 3. tenant_id in every spelling, on every list.
        lists = ["/v1/sessions", "/v1/approvals", "/v1/audit", "/v1/audit/requests", "/v1/snapshots", "/v1/keys", "/v1/tenants"]
        spellings = [
            f"tenant_id={victim.tenant_id}", f"tenant_id={attacker.tenant_id}&tenant_id={victim.tenant_id}",
            f"tenant_id={victim.tenant_id}&tenant_id={attacker.tenant_id}", f"tenant_id={victim.tenant_id.upper()}",
            f"tenant_id={victim.tenant_id}%00", f"tenant_id=%20{victim.tenant_id}", "tenant_id=", "tenant_id=%25",
            f"TENANT_ID={victim.tenant_id}", f"tenant_id[]={victim.tenant_id}", f"tenant-id={victim.tenant_id}",
            f"tenant={victim.tenant_id}", f"session_id={sid}", f"state=pending&tenant_id={victim.tenant_id}",
        ]
        for path in lists:
            for query in spellings:
                tally.check(f"GET {path}?{query}", ca.get(f"{path}?{query}"), path not in ("/v1/keys", "/v1/tenants"))

        # 4. Header tricks: another tenant named, the path or method overridden, forged keys.
        forged_secret = attacker.token.split("_", 2)[2]
        tricks: list[dict[str, str]] = [
            {"X-Tenant-Id": victim.tenant_id}, {"X-Caisson-Tenant": victim.tenant_id}, {"Tenant-Id": victim.tenant_id},
            {"X-Forwarded-User": "admin"}, {"X-Scope": "admin"}, {"X-Original-URL": "/v1/tenants"},
            {"X-Rewrite-URL": "/v1/tenants"}, {"X-HTTP-Method-Override": "DELETE"}, {"X-Forwarded-Prefix": "/v1/admin"},
            {"Forwarded": "for=127.0.0.1;host=admin"}, {"X-Forwarded-For": "127.0.0.1"}, {"Host": "localhost"},
            {"Authorization": f"Bearer cai_{admin_key}_{forged_secret}"},
            {"Authorization": f"Bearer cai_{victim.key_id}_{forged_secret}"},
            {"Authorization": f"bearer {attacker.token}, Bearer cai_{admin_key}_{forged_secret}"},
            {"Authorization": f"Basic {attacker.token}"}, {"Authorization": f"Bearer {attacker.token}\tcai_{admin_key}_x"},
        ]
        targets = [("get", f"/v1/sessions/{sid}", False), ("delete", f"/v1/sessions/{sid}", False),
                   ("get", "/v1/tenants", False), ("get", "/v1/sessions", True), ("get", "/v1/audit", True),
                   ("get", f"/v1/approvals/{approval}", False), ("post", "/v1/admin/keys", False)]
        for headers in tricks:
            for method, path, own_list in targets:
                body = {"json": {"label": "evil"}} if path == "/v1/admin/keys" else {}
                tally.check(f"{method} {path} {headers}", ca.request(method, path, headers=headers, **body), own_list)

        # Nothing changed: the victim's session, file, task, approval, snapshot; tenants and keys.
        assert cv.get(f"/v1/sessions/{sid}").json()["state"] == "open"
        assert cv.get(f"/v1/sessions/{sid}/files", params={"path": "/workspace/secret.txt"}).content == marker.encode()
        assert cv.get(f"/v1/sessions/{sid}/files", params={"path": "/workspace/pwned"}).status_code == 404
        assert cv.get(f"/v1/sessions/{sid}/tasks/{task}").json()["running"] is True
        assert cv.get(f"/v1/approvals/{approval}").json()["state"] == "pending"
        assert [s["id"] for s in cv.get("/v1/snapshots").json()["items"]] == [snap]
        assert admin.get("/v1/tenants", params={"limit": 10_000}).json()["items"] == tenants_before
        assert admin.get("/v1/keys", params={"limit": 10_000}).json()["items"] == keys_before
        assert [s["id"] for s in ca.get("/v1/sessions").json()["items"]] == [own]
        print(f"admin scope and other tenants, attacked with a tenant key on {api.store}: tried {tally.tried}, "
              f"landed {len(tally.landed)}")
        assert tally.landed == []

        # The admin key: every tenant's, filtered by tenant, and it closes the victim's session.
        for path in ("/v1/sessions", "/v1/approvals", "/v1/audit", "/v1/audit/requests"):
            every = admin.get(path, params={"limit": 10_000}).json()["items"]
            owners = {item.get("tenant_id", item.get("tenant")) for item in every}
            # The attacker asked for no approval: the victim's pending one is there.
            assert ({victim.tenant_id} if path == "/v1/approvals" else {victim.tenant_id, attacker.tenant_id}) <= owners, path
            only = admin.get(path, params={"limit": 10_000, "tenant_id": victim.tenant_id}).json()["items"]
            assert only and {item.get("tenant_id", item.get("tenant")) for item in only} == {victim.tenant_id}, path
        assert admin.delete(f"/v1/sessions/{sid}").status_code == 204
        # The waiting call ends with its session (before, it waited out the approval timeout).
        waiting.join(30)
        assert not waiting.is_alive() and "result" in box
        result = box["result"]
        assert result["decision"] == "denied" and "its session was closed" in result["text"], result
        assert cv.get(f"/v1/approvals/{approval}").json()["state"] == "expired"
        closed = cv.get(f"/v1/sessions/{sid}").json()
        assert (closed["state"], closed["closed_reason"]) == ("closed", "closed on request")
        assert ca.delete(f"/v1/sessions/{own}").status_code == 204
