"""HTTP conventions a client author expects of the API: a version prefix (the old paths still
answer), the API key as a bearer security scheme on every operation of the document,
readable operation ids, and RemoteRuntime.attach to a session opened elsewhere."""

from __future__ import annotations

import httpx
import pytest

from caisson.errors import SessionError
from caisson.remote import RemoteRuntime
from tests.server.harness import Api

pytestmark = pytest.mark.anyio


def test_the_document_has_a_version_prefix_bearer_security_and_readable_ids(sqlite_api: Api) -> None:
    with httpx.Client(base_url=sqlite_api.url) as anon:
        doc = anon.get("/openapi.json").json()
    assert doc["components"]["securitySchemes"]["apiKey"] == {
        "type": "http", "scheme": "bearer", "description": "an API key, cai_<key id>_<secret>"
    }
    operations = {op["operationId"]: (path, op) for path, ops in doc["paths"].items() for op in ops.values()}
    api_paths = [path for path in doc["paths"] if path not in ("/healthz", "/readyz", "/metrics")]  # no key
    print(f"{len(api_paths)} paths, {len(operations)} operations; ids: {sorted(operations)[:8]} ...")
    assert api_paths and all(path.startswith("/v1/") for path in api_paths)
    assert all(op.get("security") == [{"apiKey": []}] for path, op in operations.values() if path.startswith("/v1/"))
    assert len(operations) == sum(len(ops) for ops in doc["paths"].values())  # unique
    assert {"call", "create_session", "list_sessions", "audit_events", "answer_approval"} <= set(operations)
    assert operations["call"][0] == "/v1/sessions/{session_id}/calls"


async def test_old_paths_answer_and_a_remote_client_attaches(sqlite_api: Api) -> None:
    t = sqlite_api.tenant("conventions")
    async with httpx.AsyncClient(base_url=sqlite_api.url, headers=t.headers, timeout=60) as c:
        opened = await c.post("/v1/sessions", json={})
        assert opened.status_code == 201, opened.text
        sid = opened.json()["id"]
        assert (await c.get("/sessions")).json() == (await c.get("/v1/sessions")).json()["items"]
        task = (await c.post(f"/v1/sessions/{sid}/tasks", json={"command": "echo from before"})).json()["task_id"]
    async with RemoteRuntime(sqlite_api.url, t.token) as rt:
        s = await rt.attach(sid)
        assert (await s.exec("echo attached")).stdout == "attached\n"
        out = await s.task_read(task, wait=10)
        assert out.stdout == "from before\n"
        await s.close()
        with pytest.raises(SessionError):
            await rt.attach(sid)
