"""Egress through ``caisson serve``: a session's list is bounded by its tenant's quota, and
every connection is counted in /metrics under the tenant."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import docker
import pytest

from caisson.docker.images import build_image
from caisson.remote import RemoteError, RemoteRuntime
from caisson.server.settings import ServeSettings
from caisson.server.store import Store, database_url
from tests.loop import run_async
from tests.server.harness import Api, ServerThread, approving

from .servers import NAMES, Origin


@pytest.fixture(scope="module")
def served(origin: Origin, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    client = docker.from_env()
    image = build_image(client)
    client.close()
    settings = ServeSettings(
        port=0, state_dir=str(tmp_path_factory.mktemp("serve-egress")), image=image,
        egress_hosts=dict.fromkeys(NAMES, "127.0.0.1"), approval_timeout=5,
    )
    server = ServerThread(settings).start()
    assert server.hosted.admin_token
    yield Api(server.url, server.hosted.admin_token, "sqlite", server)
    server.stop()


def metric(text: str, name: str, **labels: str) -> float:
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_egress_within_the_tenant_quota_and_counted_per_tenant(served: Api, origin: Origin, tmp_path: Path) -> None:
    h = origin.http_port
    allowed = f"origin.test:{h}"
    tenant = served.tenant("egress", egress=[allowed])
    with tenant.client() as c:
        beyond = c.post("/sessions", json={"egress": [allowed, f"evil.test:{h}"]})
        assert beyond.status_code == 403 and "evil.test" in beyond.json()["detail"], beyond.text
        made = c.post("/sessions", json={"egress": [allowed]})
        assert made.status_code == 201, made.text
        sid = made.json()["id"]
        fetch = "python3 -c \"import urllib.request as u; print(u.urlopen('http://%s/hello', timeout=20).read())\""
        # python3 is dangerous to the policy: the tenant's approver lets the command run (only:
        # a connection beyond the session's egress entries is still refused).
        with approving(tenant, tools=("bash",)):
            ok = c.post(f"/sessions/{sid}/exec", json={"command": fetch % allowed}).json()
            refused = c.post(f"/sessions/{sid}/exec", json={"command": fetch % f"other.test:{h}"}).json()
        assert ok["exit_code"] == 0 and "hello from origin.test" in ok["stdout"], ok
        assert refused["exit_code"] != 0 and "403" in refused["stderr"], refused
        deadline = time.monotonic() + 30
        with served.admin as admin:
            while True:
                text = admin.get("/metrics").text
                allowed_n = metric(text, "caisson_egress_connections_total", tenant=tenant.tenant_id, decision="allow")
                denied_n = metric(text, "caisson_egress_connections_total", tenant=tenant.tenant_id, decision="denied")
                if (allowed_n, denied_n) == (1, 1) or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            assert (allowed_n, denied_n) == (1, 1), [line for line in text.splitlines() if "egress" in line]
            assert metric(text, "caisson_egress_bytes_total", tenant=tenant.tenant_id, direction="in") > 0
        c.delete(f"/sessions/{sid}")
    assert re.search(r"caisson_egress_bytes_total\{", text)


@pytest.mark.anyio
async def test_remote_runtime_opens_sessions_with_egress(served: Api, origin: Origin) -> None:
    allowed = f"origin.test:{origin.http_port}"
    tenant = served.tenant("egress-remote", egress=[allowed])
    async with RemoteRuntime(served.url, tenant.token) as rt:
        session = await rt.open_session(egress=[allowed])
        try:
            with approving(tenant, tools=("bash",)):
                ran = await session.exec(f"python3 -c \"import urllib.request as u; print(u.urlopen('http://{allowed}/hello').read())\"")
            assert ran.exit_code == 0 and "hello from origin.test" in ran.stdout, ran
        finally:
            await session.close()
        with pytest.raises(RemoteError) as beyond:
            await rt.open_session(egress=["github"])
        assert beyond.value.status == 403 and "github" in str(beyond.value)


@pytest.mark.parametrize("on_stop", ["close", "hand-over"])
def test_a_connection_open_when_the_server_stops_is_in_its_audit(on_stop: Literal["close", "hand-over"], origin: Origin, tmp_path: Path) -> None:
    """The server's store is its audit of record: a session's egress connection, still open
    when the server stops and cut as its session closes (or is handed over), is audited there
    (its event is recorded after the audit writer's last tick)."""
    client = docker.from_env()
    image = build_image(client)
    settings = ServeSettings(
        port=0, state_dir=str(tmp_path), image=image, egress_hosts=dict.fromkeys(NAMES, "127.0.0.1"), approval_timeout=30,
        on_stop=on_stop,
    )
    server = ServerThread(settings).start()
    assert server.hosted.admin_token
    api = Api(server.url, server.hosted.admin_token, "sqlite", server)
    allowed = f"origin.test:{origin.http_port}"
    tenant = api.tenant("egress-stop", egress=[allowed])
    streams_before = origin.open_streams
    sid = ""
    try:
        with tenant.client() as c, approving(tenant, tools=("bash",)):
            sid = c.post("/sessions", json={"egress": [allowed]}).json()["id"]
            hold = f"python3 -c \"import urllib.request as u; u.urlopen('http://{allowed}/drip', timeout=300).read()\""
            task = c.post(f"/sessions/{sid}/tasks", json={"command": hold})
            assert task.status_code in (200, 201), task.text
            deadline = time.monotonic() + 60
            while origin.open_streams <= streams_before:
                assert time.monotonic() < deadline, "the task's connection did not open"
                time.sleep(0.2)
    finally:
        server.stop()
        for handed_over in client.containers.list(all=True, sparse=True, filters={"label": f"caisson.session={sid}"}):
            handed_over.remove(force=True)
        client.close()
    store = Store(database_url(None, tmp_path))
    try:
        events = run_async(lambda: store.audit(None, session_id=sid, tool="egress"))
    finally:
        store.close()
    print(f"on stop {on_stop}: egress connections open at the stop: 1; audited in the store: {len(events)}")
    assert [(e.preview, e.decision) for _, e in events] == [(f"GET {allowed}", "allow")]
