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
