"""Every list pages the way ``/audit`` does: ``limit``, ``order`` and ``cursor`` in,
``{items, next_cursor}`` out. Walked a page at a time, a list shows each item once, in order,
with rows added between pages neither shifting a page nor showing twice; the old paths still
answer the bare list they answered before pages."""

from __future__ import annotations

import time
from typing import Any

import httpx

from tests.server.harness import Api
from tests.server.test_api import DANGEROUS, call_in_thread, open_session


def walk(c: httpx.Client, path: str, limit: int = 2, **params: Any) -> tuple[list[dict[str, Any]], int]:
    """Every item of a list, a page of ``limit`` at a time, and how many pages it took."""
    items: list[dict[str, Any]] = []
    cursor, pages = None, 0
    while True:
        r = c.get(path, params={**params, "limit": limit, **({"cursor": cursor} if cursor else {})})
        assert r.status_code == 200, r.text
        page = r.json()
        assert set(page) <= {"items", "next_cursor"} and len(page["items"]) <= limit
        items += page["items"]
        pages += 1
        cursor = page.get("next_cursor")
        if cursor is None:
            return items, pages


def ids(items: list[dict[str, Any]], key: str = "id") -> list[str]:
    return [str(i[key]) for i in items]


def test_every_list_pages_by_cursor(api: Api) -> None:
    t = api.tenant("paging", calls_per_minute=100_000)
    with t.client() as c, api.admin as admin:
        sids = [open_session(c) for _ in range(5)]
        listed, pages = walk(c, "/v1/sessions")
        assert ids(listed) == sids and pages == 3
        newest, _ = walk(c, "/v1/sessions", order="newest")
        assert ids(newest) == sids[::-1]
        # A session opened between two pages shows once, at its place: last, oldest first.
        first = c.get("/v1/sessions", params={"limit": 2}).json()
        late = open_session(c)
        rest = c.get("/v1/sessions", params={"limit": 100, "cursor": first["next_cursor"]}).json()
        assert ids(first["items"] + rest["items"]) == [*sids, late]
        assert ids(c.get("/sessions").json()) == [*sids, late]          # the old path: a bare list

        snaps = [c.post(f"/v1/sessions/{sid}/snapshot").json()["id"] for sid in sids[:3]]
        assert ids(walk(c, "/v1/snapshots")[0]) == snaps
        assert ids(walk(c, "/v1/snapshots", order="newest")[0]) == snaps[::-1]

        waiting = [call_in_thread(t, sids[0], {"command": f"{DANGEROUS} # {n}"}) for n in range(3)]
        deadline = time.monotonic() + 60
        while len(pending := walk(c, "/v1/approvals")[0]) < 3:
            assert time.monotonic() < deadline, f"{len(pending)} of 3 approvals asked for"
            time.sleep(0.2)
        assert len(set(ids(pending))) == 3 and ids(walk(c, "/v1/approvals", order="newest")[0]) == ids(pending)[::-1]
        assert ids(c.get("/approvals").json()) == ids(pending)
        for approval in pending:
            c.post(f"/v1/approvals/{approval['id']}", json={"decision": "deny"})
        for thread, _ in waiting:
            thread.join(30)
        assert ids(walk(c, "/v1/approvals", state="deny")[0]) == ids(pending)

        for sid in [*sids, late]:
            assert c.delete(f"/v1/sessions/{sid}").status_code == 204
        assert ids(walk(c, "/v1/sessions", state="closed")[0]) == [*sids, late]

        requests, pages = walk(c, "/v1/audit/requests", limit=10)
        assert pages > 1 and len(requests) == len({(r["time"], r["path"], r["method"]) for r in requests})
        assert requests[:2] == c.get("/audit/requests", params={"limit": 2}).json()
        assert walk(c, "/v1/audit/requests", limit=10, order="newest")[0][::-1][: len(requests)] == requests

        # Admin lists: tenants and keys.
        others = [api.tenant(f"paging-{n}") for n in range(3)]
        tenants, pages = walk(admin, "/v1/tenants")
        assert pages > 1 and {t.tenant_id, *(o.tenant_id for o in others)} <= set(ids(tenants))
        assert len(tenants) == len(set(ids(tenants)))
        assert ids(tenants)[-3:] == [o.tenant_id for o in others]
        for _ in range(2):
            admin.post(f"/v1/tenants/{t.tenant_id}/keys", json={"label": "more"})
        keys, pages = walk(admin, "/v1/keys", tenant_id=t.tenant_id)
        assert pages == 2 and len(keys) == 3 and ids(keys)[0] == t.key_id
        assert ids(admin.get("/keys", params={"tenant_id": t.tenant_id}).json()) == ids(keys)

        bad = c.get("/v1/sessions", params={"cursor": "not a cursor"})
        assert bad.status_code == 422 and bad.headers["content-type"] == "application/problem+json"
        forged = c.get("/v1/sessions", params={"cursor": "1.2.3_x"})
        assert forged.status_code == 422 and forged.json()["error"] == "invalid_cursor"
        print(f"paged on {api.store}: 6 sessions, 3 snapshots, 3 approvals, {len(requests)} requests, "
              f"{len(tenants)} tenants, 3 keys")
