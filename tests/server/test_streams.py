"""Streamed output over Server-Sent Events, cut and resumed; and the Prometheus metrics."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx

from tests.server.harness import Api, approving
from tests.server.test_api import open_session

# 40 numbered lines on stdout, every fifth also on stderr, spread over about 2 s.
COMMAND = 'for i in $(seq 1 40); do echo "line $i"; [ $((i % 5)) = 0 ] && echo "err $i" >&2; sleep 0.05; done; exit 7'
STDOUT = "".join(f"line {i}\n" for i in range(1, 41))
STDERR = "".join(f"err {i}\n" for i in range(5, 41, 5))


def events(response: httpx.Response) -> Iterator[dict[str, Any]]:
    fields: dict[str, Any] = {}
    for line in response.iter_lines():
        if not line:
            if "event" in fields:
                yield {**fields, "data": json.loads(fields["data"])}
            fields = {}
        elif not line.startswith(":"):
            key, _, value = line.partition(": ")
            fields[key] = value


def test_exec_stream_resumes_without_loss_or_repeat(sqlite_api: Api) -> None:
    t = sqlite_api.tenant("stream")
    out, err = "", ""
    with t.client() as c:
        sid = open_session(c)
        # Arithmetic on variables is dangerous to the policy: the tenant's approver lets it run.
        with approving(t), c.stream("POST", f"/sessions/{sid}/exec-stream", json={"command": COMMAND}) as r:
            assert r.headers["content-type"].startswith("text/event-stream")
            stream = events(r)
            task_id = next(stream)["data"]["task_id"]
            for ev in stream:                          # part of the output, then the line drops
                if ev["event"] == "stdout":
                    out += ev["data"]["data"]
                elif ev["event"] == "stderr":
                    err += ev["data"]["data"]
                last_id = ev["id"]
                if out.count("\n") >= 10:
                    break
        assert out  # (a loaded machine may have sent it all by now: then the resumes carry only the exit)

        # Resumed by Last-Event-ID, cut again, then resumed by query parameters.
        with c.stream("GET", f"/sessions/{sid}/tasks/{task_id}/stream", headers={"Last-Event-ID": last_id}) as r:
            for ev in events(r):
                if ev["event"] == "stdout":
                    assert ev["data"]["offset"] == len(out.encode())
                    out += ev["data"]["data"]
                elif ev["event"] == "stderr":
                    err += ev["data"]["data"]
                last_id = ev["id"]
                if out.count("\n") >= 25:
                    break
        stdout_at, stderr_at = last_id.split(":")
        exit_event = None
        params = {"stdout_offset": stdout_at, "stderr_offset": stderr_at}
        with c.stream("GET", f"/sessions/{sid}/tasks/{task_id}/stream", params=params) as r:
            for ev in events(r):
                if ev["event"] == "stdout":
                    out += ev["data"]["data"]
                elif ev["event"] == "stderr":
                    err += ev["data"]["data"]
                elif ev["event"] == "exit":
                    exit_event = ev["data"]
        assert (out, err) == (STDOUT, STDERR)
        assert exit_event == {"exit_code": 7, "signal": None, "timed_out": False}

        assert c.get(f"/sessions/{sid}/tasks/t-nope/stream").status_code == 404
        c.delete(f"/sessions/{sid}")


def test_metrics_count_sessions_calls_and_latency(sqlite_api: Api) -> None:
    t = sqlite_api.tenant("metrics")
    with t.client() as c:
        sid = open_session(c)
        for _ in range(3):
            c.post(f"/sessions/{sid}/calls", json={"tool": "calculate", "args": {"expression": "2 ^ 8"}})  # mathjs syntax
        c.post(f"/sessions/{sid}/calls", json={"tool": "bash", "args": {"command": "rm -rf /"}})
        text = httpx.get(f"{sqlite_api.url}/metrics").text
        assert f'caisson_sessions{{tenant="{t.tenant_id}"}} 1.0' in text
        assert 'caisson_calls_total{decision="allow",outcome="ok",tool="calculate"}' in text
        assert 'caisson_calls_total{decision="denied",outcome="permission_denied",tool="bash"}' in text
        assert 'caisson_call_seconds_bucket{le="0.1",tool="calculate"}' in text
        c.delete(f"/sessions/{sid}")
    assert f'caisson_sessions{{tenant="{t.tenant_id}"}}' not in httpx.get(f"{sqlite_api.url}/metrics").text
