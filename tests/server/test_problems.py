"""One error shape everywhere: every error answer of the API, whichever layer makes it
(route, validation, routing, body limit, authentication, quotas), is an RFC 9457 problem
document (``application/problem+json``) with ``type``, ``title``, ``status``, ``detail``
and the stable ``error`` code."""

from __future__ import annotations

import httpx

from tests.server.harness import Api


def _is_problem(r: httpx.Response, status: int, error: str) -> None:
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == "application/problem+json", r.headers
    body = r.json()
    assert body["status"] == status and body["error"] == error and body["type"] == "about:blank", body
    assert body["title"] and body["detail"], body


def test_every_error_is_a_problem_document(sqlite_api: Api) -> None:
    t = sqlite_api.tenant("problems", max_sessions=0)
    with t.client() as c, httpx.Client(base_url=sqlite_api.url, timeout=30) as anon:
        answers = {
            "unauthenticated": (anon.get("/sessions"), 401, "unauthorized"),
            "invalid body": (c.post("/sessions", json={"ttl": "soon"}), 422, "invalid_request"),
            "invalid query": (c.get("/audit", params={"limit": 0}), 422, "invalid_request"),
            "unknown route": (c.get("/no/such/route"), 404, "not_found"),
            "wrong method": (c.put("/sessions"), 405, "method_not_allowed"),
            "unknown session": (c.get("/sessions/s-nope"), 404, "no_such_session"),
            "over quota": (c.post("/sessions", json={}), 429, "quota_exceeded"),
            "admin only": (c.get("/tenants"), 403, "forbidden"),
            "body too large": (c.post("/sessions", content=b"x" * (17 * 1024 * 1024)), 413, "body_too_large"),
        }
        for what, (r, status, error) in answers.items():
            print(what, r.status_code, r.headers.get("content-type"), r.text[:160])
            _is_problem(r, status, error)
        assert answers["wrong method"][0].headers["allow"]
        assert answers["invalid body"][0].json()["errors"][0]["loc"] == ["body", "ttl"]
        assert "Retry-After" in answers["over quota"][0].headers


def test_the_tool_call_route_answers_as_every_route(sqlite_api: Api) -> None:
    """The tool call is served in front of FastAPI's generic handling: its failures are the
    same problem documents, its body is taken as strictly (JSON by content type, no unknown
    field), and its answer is the documented ``ToolResult``."""
    t, other = sqlite_api.tenant("call-route"), sqlite_api.tenant("call-route-other")
    with t.client() as c, other.client() as o, httpx.Client(base_url=sqlite_api.url, timeout=30) as anon:
        sid = c.post("/v1/sessions", json={}).json()["id"]
        path = f"/v1/sessions/{sid}/calls"
        answers = {
            "unauthenticated": (anon.post(path, json={"tool": "calculate"}), 401, "unauthorized"),
            "another tenant's session": (o.post(path, json={"tool": "calculate"}), 404, "no_such_session"),
            "unknown session": (c.post("/v1/sessions/s-nope/calls", json={"tool": "calculate"}), 404, "no_such_session"),
            "no body": (c.post(path), 422, "invalid_request"),
            "not JSON": (c.post(path, content=b"{", headers={"content-type": "application/json"}), 422, "invalid_request"),
            "text/plain": (c.post(path, content=b'{"tool": "calculate"}', headers={"content-type": "text/plain"}), 422, "invalid_request"),
            "unknown field": (c.post(path, json={"tool": "calculate", "sudo": True}), 422, "invalid_request"),
            "empty tool": (c.post(path, json={"tool": ""}), 422, "invalid_request"),
            "wrong method": (c.put(path, json={"tool": "calculate"}), 405, "method_not_allowed"),
        }
        for what, (r, status, error) in answers.items():
            print(what, r.status_code, r.text[:160])
            _is_problem(r, status, error)
        assert answers["unauthenticated"][0].headers["www-authenticate"] == "Bearer"
        assert answers["unknown field"][0].json()["errors"][0]["loc"] == ["body", "sudo"]
        for old_path in (path, f"/sessions/{sid}/calls"):
            ok = c.post(old_path, json={"tool": "calculate", "args": {"expression": "6*7"}})
            assert ok.status_code == 200 and ok.headers["content-type"] == "application/json"
            assert ok.json()["ok"] and "42" in ok.json()["text"] and ok.json()["call_id"].startswith("c-")
        c.delete(f"/v1/sessions/{sid}")
