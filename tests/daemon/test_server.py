"""Framing, dispatch, concurrency and lifetime of the daemon."""

import struct
import time
from pathlib import Path

from conftest import Client, start_daemon
from sandbox.protocol import encode_frame


def test_unknown_op_and_bad_args(daemon: Client) -> None:
    assert daemon.error("frobnicate").code == "bad_request"
    assert daemon.error("stat").code == "bad_request"  # missing path
    assert daemon.error("stat", path=5).code == "bad_request"
    assert daemon.error("read", path="/etc/hostname", offset=True).code == "bad_request"
    assert daemon.error("read", path="/etc/\0passwd").code == "bad_request"
    daemon.send_raw(encode_frame({"id": 99, "op": "ping", "args": []}))
    header, _ = daemon.recv(99)
    assert header["ok"] is False and header["error"]["code"] == "bad_request"
    daemon.send_raw(encode_frame({"id": 100, "op": "ping"}))  # args may be omitted
    assert daemon.recv(100)[0]["ok"] is True


def test_replies_arrive_out_of_order(daemon: Client) -> None:
    started = time.monotonic()
    slow = daemon.send("exec", command="sleep 0.5; echo slow")
    fast = daemon.send("ping")
    daemon.recv(fast)
    assert time.monotonic() - started < 0.4  # did not queue behind the slow call
    result, blob = daemon.result(slow)
    assert blob == b"slow\n" and time.monotonic() - started >= 0.5


def test_fifty_concurrent_requests(daemon: Client) -> None:
    started = time.monotonic()
    ids = {}
    for i in range(50):
        if i % 5 == 0:
            ids[daemon.send("ping")] = ("ping", i)
        elif i % 5 == 1:
            ids[daemon.send("write", b"%d" % i, path=str(daemon.workspace / ("f%d" % i)))] = ("write", i)
        else:
            ids[daemon.send("exec", command="sleep 0.4; echo %d" % i)] = ("exec", i)
    for req_id, (op, i) in ids.items():
        result, blob = daemon.result(req_id)
        if op == "exec":
            assert blob == b"%d\n" % i and result["exit_code"] == 0
        elif op == "write":
            assert result["size"] == len(b"%d" % i)
    # 30 execs of 0.4 s each ran in parallel, not one after another.
    assert time.monotonic() - started < 4.0


def test_bad_frame_kills_daemon(tmp_path: Path) -> None:
    client = start_daemon(tmp_path)
    client.call("ping")
    client.call("spawn", argv=["sleep", "313"])
    body = b"not json"
    client.send_raw(struct.pack(">II", 4 + len(body), len(body)) + body)
    assert client.proc.wait(10) != 0
    assert "protocol error" in client.stderr()


def test_frame_without_id_kills_daemon(tmp_path: Path) -> None:
    client = start_daemon(tmp_path)
    client.send_raw(encode_frame({"op": "ping", "args": {}}))
    assert client.proc.wait(10) != 0


def test_eof_exits_cleanly(tmp_path: Path) -> None:
    client = start_daemon(tmp_path)
    client.call("ping")
    assert client.close() == 0
    assert "Traceback" not in client.stderr()


def test_workspace_created(tmp_path: Path) -> None:
    client = start_daemon(tmp_path, env={"CAISSON_WORKSPACE": str(tmp_path / "deep" / "ws")})
    client.call("ping")
    assert (tmp_path / "deep" / "ws").is_dir()
    result, blob = client.call("exec", command="pwd")
    assert blob == str(tmp_path / "deep" / "ws").encode() + b"\n"
    assert client.close() == 0


def test_latency(daemon: Client) -> None:
    """Round trips stay in the low milliseconds (loose bounds: CI machines vary)."""
    for _ in range(20):
        daemon.call("ping")
    started = time.perf_counter()
    for _ in range(200):
        daemon.call("ping")
    ping = (time.perf_counter() - started) / 200
    started = time.perf_counter()
    for _ in range(200):
        daemon.call("exec", command="true")
    exec_true = (time.perf_counter() - started) / 200
    assert ping < 0.005, ping
    assert exec_true < 0.05, exec_true
