"""`caisson mcp` as an MCP client runs it: a subprocess speaking JSON-RPC lines (real engine)."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import docker
import pytest

from tests.loop import run_async

LABEL = "caisson.session"


def _labels(client: docker.DockerClient) -> list[dict[str, str]]:
    # The engine's list alone: the client's model list also inspects each container, and one
    # removed meanwhile (another test's) failed the call with a 404.
    return [row["Labels"] for row in client.api.containers(all=True, filters={"label": LABEL})]


def session_ids(client: docker.DockerClient) -> set[str]:
    return {labels[LABEL] for labels in _labels(client)}


def sessions_of(client: docker.DockerClient, pid: int) -> set[str]:
    """Sessions whose owner is process ``pid`` (the owner label is host:pid:start)."""
    return {
        labels[LABEL] for labels in _labels(client) if labels.get("caisson.owner", "").split(":")[1:2] == [str(pid)]
    }


class McpClient:
    """Writes requests as lines; a thread collects every stdout line, so nothing can block."""

    def __init__(self, *args: str, state: Path) -> None:
        self.stderr = (state / "mcp-stderr.log").open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "caisson.interfaces.cli", "mcp", *args],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr,
            env={**os.environ, "CAISSON_STATE_DIR": str(state)},
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        self.received: list[dict[str, Any]] = []
        self._next_id = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def write(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()

    def send(self, method: str, params: dict[str, Any] | None = None, *, notify: bool = False) -> int:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self._next_id += 1
        if not notify:
            message["id"] = self._next_id
        self.write(json.dumps(message))
        return self._next_id

    def receive(self, timeout: float = 60) -> dict[str, Any]:
        line = self.lines.get(timeout=timeout)
        # stdout carries protocol messages only: every line is one JSON-RPC 2.0 message.
        message: dict[str, Any] = json.loads(line)
        assert message["jsonrpc"] == "2.0" and ("result" in message) != ("error" in message), message
        self.received.append(message)
        return message

    def reply(self, id_: int | None, timeout: float = 60) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            for message in self.received:
                if message["id"] == id_:
                    self.received.remove(message)
                    return message
            self.receive(timeout=max(0.1, deadline - time.monotonic()))

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return self.reply(self.send(method, params))

    def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        reply = self.request("tools/call", {"name": tool, "arguments": arguments})
        assert "result" in reply, reply
        result: dict[str, Any] = reply["result"]
        return result

    def close(self, timeout: float = 15) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            self.stderr.close()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.stderr.close()


@pytest.fixture
def docker_client() -> Any:
    client = docker.from_env()
    yield client
    client.close()


def new_session(client: docker.DockerClient, pid: int, seen: frozenset[str] = frozenset()) -> str:
    """The one session process ``pid`` opened that is not in ``seen``."""
    started = sessions_of(client, pid) - seen
    assert len(started) == 1, started
    return started.pop()


def test_amp_profile_over_mcp(tmp_path: Path, docker_client: docker.DockerClient) -> None:
    mcp = McpClient("--profile", "amp", state=tmp_path)
    try:
        init = mcp.request(
            "initialize",
            {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "pytest", "version": "1"}},
        )["result"]
        assert init["protocolVersion"] == "2025-06-18"
        assert init["serverInfo"]["name"] == "caisson" and init["serverInfo"]["version"]
        assert init["capabilities"] == {"tools": {"listChanged": False}}
        assert init["instructions"].startswith("Available tools:") and "- Read:" in init["instructions"]
        mcp.send("notifications/initialized", notify=True)

        tools = {t["name"]: t for t in mcp.request("tools/list")["result"]["tools"]}
        for name in ("Read", "Bash", "edit_file", "create_file"):
            assert tools[name]["inputSchema"]["type"] == "object" and tools[name]["description"]
        assert "cmd" in tools["Bash"]["inputSchema"]["properties"]

        created = mcp.call("create_file", {"path": "/workspace/hello.txt", "content": "hello from mcp\n"})
        assert created["isError"] is False, created
        read = mcp.call("Read", {"path": "/workspace/hello.txt"})
        assert read["isError"] is False and read["content"][0]["type"] == "text"
        assert "hello from mcp" in read["content"][0]["text"]
        assert isinstance(read["structuredContent"], dict)

        denied = mcp.call("Bash", {"cmd": "rm -rf /"})
        assert denied["isError"] is True and "known-destructive" in denied["content"][0]["text"]
        invalid = mcp.call("Read", {"nope": 1})
        assert invalid["isError"] is True and "path" in invalid["content"][0]["text"]

        # A line that is not a JSON-RPC message gets no answer from the SDK (it cannot name the
        # request), and the server carries on.
        mcp.write('{"jsonrpc": "2.0", "id": 99, "method": "ping"')  # cut short
        mcp.write("[]")
        assert mcp.request("ping")["result"] == {}
        assert mcp.request("resources/list")["error"]["code"] == -32601
        unknown = mcp.request("tools/call", {"name": "no_such_tool", "arguments": {}})
        assert unknown["error"]["code"] == -32602 and "no_such_tool" in unknown["error"]["message"]

        sid = new_session(docker_client, mcp.proc.pid)
        assert mcp.close() == 0
    finally:
        mcp.kill()
    # Notifications got no reply: every message was claimed by the request it answered.
    assert mcp.received == [] and mcp.lines.empty()
    assert sid not in session_ids(docker_client)


def test_caisson_profile_approve_all_over_mcp(tmp_path: Path, docker_client: docker.DockerClient) -> None:
    mcp = McpClient("--profile", "caisson", "--approve-all", state=tmp_path)
    try:
        # An older client's version is accepted (and structuredContent, newer, is left out).
        init = mcp.request(
            "initialize", {"protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {"name": "old", "version": "0"}}
        )["result"]
        assert init["protocolVersion"] == "2024-11-05"
        mcp.send("notifications/initialized", notify=True)

        hi = mcp.call("bash", {"command": "echo hi"})
        assert hi["isError"] is False and hi["content"][0]["text"].strip() == "hi"
        assert "structuredContent" not in hi

        # Requests run concurrently: a ping overtakes a slow call, and a cancelled call
        # gets no reply at all.
        sid = new_session(docker_client, mcp.proc.pid)
        [container] = docker_client.containers.list(filters={"label": f"{LABEL}={sid}"})

        def stuck_running() -> bool:
            return container.exec_run(["pgrep", "-f", "^sleep 60$"]).output.strip() != b""

        slow = mcp.send("tools/call", {"name": "bash", "arguments": {"command": "sleep 2; echo slow"}})
        stuck = mcp.send("tools/call", {"name": "bash", "arguments": {"command": "sleep 60"}})
        pinged = mcp.send("ping")
        assert mcp.receive()["id"] == pinged
        deadline = time.monotonic() + 10  # cancel a call that is under way, not one still queued
        while not stuck_running() and time.monotonic() < deadline:
            time.sleep(0.05)
        mcp.send("notifications/cancelled", {"requestId": stuck, "reason": "test"}, notify=True)
        assert mcp.reply(slow)["result"]["content"][0]["text"].strip() == "slow"
        # ... and the cancelled command was killed, not left to run to its timeout.
        time.sleep(0.5)
        assert not stuck_running()

        # A session whose container died is replaced on the next call, and the agent is told.
        for container in docker_client.containers.list(filters={"label": f"{LABEL}={sid}"}):
            container.kill()
        time.sleep(0.5)
        fresh = mcp.call("bash", {"command": "echo again"})
        assert fresh["isError"] is False and "fresh workspace" in fresh["content"][0]["text"]
        assert fresh["content"][0]["text"].rstrip().endswith("again")
        replacement = new_session(docker_client, mcp.proc.pid, frozenset({sid}))

        assert mcp.close() == 0
    finally:
        mcp.kill()
    assert [m for m in mcp.received if m["id"] == stuck] == []
    assert not {sid, replacement} & session_ids(docker_client)


def test_bad_options_are_one_line_on_stderr(tmp_path: Path) -> None:
    for args in (["--profile", "nope"], ["--policy", str(tmp_path / "missing.toml")]):
        proc = subprocess.run(
            [sys.executable, "-m", "caisson.interfaces.cli", "mcp", *args], input=b"", capture_output=True, timeout=60,
            env={**os.environ, "CAISSON_STATE_DIR": str(tmp_path)},
        )
        assert proc.returncode == 1 and proc.stdout == b""
        assert proc.stderr.startswith(b"caisson: error: ") and b"Traceback" not in proc.stderr


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _collect(ticks: list[float]) -> Any:
    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        ticks.append(progress)

    return on_progress


def test_streamable_http(tmp_path: Path, docker_client: docker.DockerClient) -> None:
    """`caisson mcp --http`: the SDK's own client runs tools over Streamable HTTP."""
    import anyio
    from mcp import Client

    port = _free_port()
    stderr = (tmp_path / "http-stderr.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "caisson.interfaces.cli", "mcp", "--http", f"127.0.0.1:{port}", "--approve-all"],
        stdout=subprocess.DEVNULL, stderr=stderr, env={**os.environ, "CAISSON_STATE_DIR": str(tmp_path)},
    )

    async def session() -> tuple[set[str], str, bool]:
        for _ in range(300):  # until it listens
            try:
                async with Client(f"http://127.0.0.1:{port}/mcp") as client:
                    names = {t.name for t in (await client.list_tools()).tools}
                    result = await client.call_tool("bash", {"command": "echo over http; whoami"})
                    text = result.content[0].text  # type: ignore[union-attr]
                    # A long call reports progress to a client that asks, every 5 s.
                    ticks: list[float] = []
                    long = await client.call_tool(
                        "bash", {"command": "sleep 11; echo done"}, progress_callback=_collect(ticks)
                    )
                    assert long.content[0].text.strip() == "done" and len(ticks) >= 2, ticks  # type: ignore[union-attr]
                    return names, text, bool(result.is_error)
            except Exception:
                if proc.poll() is not None:
                    raise
                await anyio.sleep(0.1)
        raise TimeoutError("the HTTP server did not answer")

    try:
        names, text, failed = run_async(session)
        assert {"bash", "read_file", "edit_file"} <= names
        assert not failed and text.split() == ["over", "http", "agent"]
        assert len(sessions_of(docker_client, proc.pid)) == 1
    finally:
        proc.send_signal(2)  # SIGINT: a clean stop
        assert proc.wait(timeout=30) == 0, (tmp_path / "http-stderr.log").read_text()
        stderr.close()
    assert sessions_of(docker_client, proc.pid) == set()
