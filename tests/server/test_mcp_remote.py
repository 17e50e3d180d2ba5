"""Remote MCP at /mcp of ``caisson serve``: the SDK's own client, authenticated by a tenant's
API key; one caisson session per MCP connection, closed when the connection ends; dangerous
calls wait in the tenant's approval queue like any other."""

from __future__ import annotations

import anyio
import docker
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests.server.harness import Api, TenantKey

pytestmark = pytest.mark.anyio


def mcp_client(url: str, token: str, mode: str = "legacy", path: str = "/mcp") -> Client:
    """The SDK's client; ``legacy``: the initialize handshake and an MCP session."""
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(60, read=120))
    return Client(streamable_http_client(f"{url}{path}", http_client=http), mode=mode)


def tenant_sessions(t: TenantKey) -> list[str]:
    with t.client() as c:
        return [s["id"] for s in c.get("/sessions").json()]


async def test_remote_mcp_one_session_per_connection(sqlite_api: Api, docker_engine: docker.DockerClient) -> None:
    t = sqlite_api.tenant("mcp")
    async with mcp_client(sqlite_api.url, t.token) as first, mcp_client(sqlite_api.url, t.token) as second:
        names = {tool.name for tool in (await first.list_tools()).tools}
        assert {"bash", "read_file", "edit_file"} <= names
        wrote = await first.call_tool("write_file", {"path": "/workspace/who.txt", "content": "first\n"})
        assert not wrote.is_error, wrote
        r = await first.call_tool("bash", {"command": "cat /workspace/who.txt; whoami"})
        assert r.content[0].text.split() == ["first", "agent"]  # type: ignore[union-attr]
        other = await second.call_tool("bash", {"command": "cat /workspace/who.txt"})
        assert "No such file" in other.content[0].text  # type: ignore[union-attr]  # a session of its own
        sessions = tenant_sessions(t)
        assert len(sessions) == 2
        for sid in sessions:
            [container] = docker_engine.containers.list(filters={"label": f"caisson.session={sid}"})
            assert container.labels["caisson.tenant"] == t.tenant_id
    # Ending the MCP connections closed their sessions (as their server tasks wind down) and
    # removed the containers.
    for _ in range(100):
        if not tenant_sessions(t):
            break
        await anyio.sleep(0.1)
    assert tenant_sessions(t) == []
    for sid in sessions:
        assert docker_engine.containers.list(filters={"label": f"caisson.session={sid}"}) == []


async def test_sessionless_requests_share_the_keys_session(sqlite_api: Api) -> None:
    """The 2026-07-28 revision has no MCP session: one caisson session per key serves it."""
    t = sqlite_api.tenant("mcp-modern")
    async with mcp_client(sqlite_api.url, t.token, mode="auto") as first:
        await first.call_tool("write_file", {"path": "/workspace/kept.txt", "content": "kept\n"})
    async with mcp_client(sqlite_api.url, t.token, mode="auto") as again:
        r = await again.call_tool("bash", {"command": "cat /workspace/kept.txt"})
        assert r.content[0].text.strip() == "kept"  # type: ignore[union-attr]
    [sid] = tenant_sessions(t)
    with t.client() as c:
        assert c.delete(f"/sessions/{sid}").status_code == 204


async def test_remote_mcp_needs_a_tenant_key(sqlite_api: Api) -> None:
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    headers = {"Accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient(base_url=sqlite_api.url) as anon:
        assert (await anon.post("/mcp", json=init, headers=headers)).status_code == 401
        admin = {**headers, "Authorization": f"Bearer {sqlite_api.admin_token}"}
        assert (await anon.post("/mcp", json=init, headers=admin)).status_code == 401
        # An MCP session answers only the key that opened it.
        a, b = sqlite_api.tenant("mcp-a"), sqlite_api.tenant("mcp-b")
        opened = await anon.post("/mcp", json=init, headers={**headers, **a.headers})
        assert opened.status_code == 200
        sid = opened.headers["mcp-session-id"]
        ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
        stolen = await anon.post("/mcp", json=ping, headers={**headers, **b.headers, "mcp-session-id": sid})
        assert stolen.status_code == 404
        await anon.delete("/mcp", headers={**a.headers, "mcp-session-id": sid})


async def test_dangerous_mcp_call_waits_for_the_tenants_answer(sqlite_api: Api) -> None:
    t = sqlite_api.tenant("mcp-approve")
    async with mcp_client(sqlite_api.url, t.token) as client:
        answer: dict[str, object] = {}

        async def approve_when_asked() -> None:
            async with httpx.AsyncClient(base_url=sqlite_api.url, headers=t.headers) as c:
                while not (pending := (await c.get("/approvals")).json()):
                    await anyio.sleep(0.1)
                answer.update(pending[0])
                await c.post(f"/approvals/{pending[0]['id']}", json={"decision": "allow_once"})

        async with anyio.create_task_group() as tg:
            tg.start_soon(approve_when_asked)
            r = await client.call_tool("bash", {"command": 'python3 -c "print(6 * 7)"'})
        assert not r.is_error and r.content[0].text.strip() == "42"  # type: ignore[union-attr]
        assert answer["tool"] == "bash" and answer["session_id"] in tenant_sessions(t)
    metrics = httpx.get(f"{sqlite_api.url}/metrics").text
    assert 'caisson_calls_total{decision="approved",outcome="ok",tool="bash"}' in metrics


async def test_every_profile_at_its_own_path(sqlite_api: Api) -> None:
    """/mcp/<profile> serves that profile's tool names and shapes; a profile the tenant's
    quotas leave out is refused at the first call, and an unknown one is 404."""
    t = sqlite_api.tenant("mcp-profiles")
    async with mcp_client(sqlite_api.url + "/mcp/amp", t.token, path="") as amp:
        names = {tool.name for tool in (await amp.list_tools()).tools}
        assert {"Read", "Bash", "edit_file", "create_file"} <= names and "bash" not in names
        made = await amp.call_tool("create_file", {"path": "/workspace/amp.txt", "content": "from amp\n"})
        assert not made.is_error, made
        ran = await amp.call_tool("Bash", {"cmd": "cat /workspace/amp.txt"})
        assert "from amp" in ran.content[0].text  # type: ignore[union-attr]
        [sid] = tenant_sessions(t)
        with t.client() as c:
            assert c.get(f"/sessions/{sid}").json()["profile"] == "amp"
    only_caisson = sqlite_api.tenant("mcp-profiles-limited", profiles=["caisson"])
    async with mcp_client(sqlite_api.url + "/mcp/amp", only_caisson.token, path="") as amp:
        with pytest.raises(MCPError, match="profile 'amp' is not allowed"):
            await amp.call_tool("Bash", {"cmd": "true"})
    assert tenant_sessions(only_caisson) == []
    with httpx.Client(headers={"Authorization": f"Bearer {t.token}"}) as c:
        unknown = c.post(f"{sqlite_api.url}/mcp/nope", json={})
        assert unknown.status_code == 404 and "amp" in unknown.json()["detail"]
