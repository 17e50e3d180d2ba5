"""The store's writer commits every call's audit event before its answer, with the request log
in the same transaction. A batch is retried until the store takes it, so a row the store
refuses would hold every later call's answer: a caller's odd text (a NUL byte, which
PostgreSQL's text refuses; a name longer than its column) must never make such a row."""

from __future__ import annotations

import json

from tests.server.harness import Api

NUL = "\x00"
# What a caller controls of the rows written for it: the tool name and arguments (audit), the
# path and its id parts (request log).
TOOLS = ["x" * 200, f"bash{NUL}", NUL * 64, "é" * 100, f"{NUL}{'y' * 150}"]
ARGS = [
    ("calculate", {"expression": f"1{NUL}+1"}), ("read_file", {"path": f"/workspace/a{NUL}b"}),
    ("bash", {f"k{NUL}": "v"}), ("calculate", {"expression": "1+" + "2" * 5000 + NUL}),
]
# Paths no route takes (the request log keeps them), and ids and filters that reach a store
# look-up (PostgreSQL refuses a NUL there too: a 503 "store does not answer" before).
PATHS = [
    "/v1/nothing/a%00b", "/v2/%00" + "q" * 3000, "/" + "p" * 5000 + "%00",
    "/v1/sessions/%00", "/v1/sessions/s-%00x", "/v1/approvals/%00", "/v1/audit/calls/c-%00",
    "/v1/snapshots/%00", "/v1/audit?session_id=%00", "/v1/audit?tool=a%00", "/v1/audit?cursor=%00",
]


def test_a_callers_odd_text_holds_no_other_calls_answer(api: Api) -> None:
    t = api.tenant("odd-text", calls_per_minute=100_000)
    tried = landed = 0
    with t.client() as c:
        sid = c.post("/v1/sessions", json={}).json()["id"]
        odd = [
            *[("post", f"/v1/sessions/{sid}/calls", {"tool": tool, "args": {}}) for tool in TOOLS],
            *[("post", f"/v1/sessions/{sid}/calls", {"tool": tool, "args": args}) for tool, args in ARGS],
            *[("get", path, None) for path in PATHS],
        ]
        for n, (method, path, body) in enumerate(odd):
            tried += 1
            # json.dumps writes a NUL as \u0000, which the server reads back as a NUL.
            sent = c.request(method, path, content=json.dumps(body) if body else None, headers={"content-type": "application/json"})
            assert sent.status_code < 500, (path, sent.status_code, sent.text[:300])
            after = c.post(f"/v1/sessions/{sid}/calls", json={"tool": "bash", "args": {"command": f"echo after {n}"}})
            audited = after.status_code == 200 and c.get(f"/v1/audit/calls/{after.json()['call_id']}").status_code == 200
            if not (audited and after.json()["text"].strip() == f"after {n}"):
                landed += 1
                print(f"after {path[:60]!r} {str(body)[:60]}: {after.status_code} {after.text[:200]}")
        # The odd calls themselves are in the audit, their text kept as far as it fits.
        events = c.get("/v1/audit", params={"session_id": sid, "limit": 100}).json()["items"]
        odd_tools = {e["tool"] for e in events} - {"bash", "calculate", "read_file"}
        requests = c.get("/v1/audit/requests", params={"order": "newest", "limit": 100}).json()["items"]
        c.delete(f"/v1/sessions/{sid}")
    print(f"{api.store}: tried {tried}, landed {landed}; odd tool names audited: {len(odd_tools)}")
    assert landed == 0
    assert len(odd_tools) == len(TOOLS)
    assert any(r["path"] == "/v1/nothing/a\\x00b" for r in requests)
