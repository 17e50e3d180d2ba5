"""Errors a user can act on: no engine, a call past its deadline, a reply too large."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import anyio
import anyio.abc
import pytest

from caisson import CallTimeout, DaemonProtocolError, DockerUnavailable, Runtime, RuntimeConfig, Session
from caisson.transport.attach import open_attach

pytestmark = pytest.mark.anyio


async def test_no_docker_engine_says_how_to_start_one(tmp_path: object) -> None:
    with pytest.raises(DockerUnavailable) as err:
        async with Runtime(RuntimeConfig(docker_host="unix:///nonexistent/docker.sock", state_dir=str(tmp_path))):
            pass
    assert "Docker is not reachable at unix:///nonexistent/docker.sock" in str(err.value)
    assert "start it with" in str(err.value)


def test_cli_errors_are_one_line_not_a_traceback(tmp_path: object) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "caisson.interfaces.cli", "demo"],
        capture_output=True, text=True, timeout=60,
        env={**os.environ, "DOCKER_HOST": "unix:///nonexistent/docker.sock", "CAISSON_STATE_DIR": str(tmp_path)},
    )
    assert proc.returncode == 1
    assert proc.stderr.startswith("caisson: error: Docker is not reachable")
    assert "Traceback" not in proc.stderr


async def test_call_past_its_deadline_times_out_and_session_lives_on(shared_session: Session) -> None:
    task = await shared_session.spawn("sleep 30")
    with pytest.raises(CallTimeout) as err:
        await shared_session.op("task_wait", {"task_id": task.task_id, "timeout": 30}, timeout=0.5)
    assert "no reply within 0.5 s" in str(err.value)
    assert (await shared_session.exec("echo alive")).stdout == "alive\n"
    await shared_session.task_signal(task.task_id)


async def test_reply_larger_than_the_limit_is_refused(rt: Runtime) -> None:
    async with rt.session(max_frame=64 * 1024) as s:
        await s.write_file("/workspace/big.bin", b"z" * (1024 * 1024))
        with pytest.raises(DaemonProtocolError) as err:
            await s.read_file("/workspace/big.bin")
        assert "exceeds the limit" in str(err.value)


async def test_engine_that_never_answers_an_attach_is_an_error_not_a_hang(tmp_path: Path) -> None:
    # A dead engine: accepts the connection, then says nothing. (A real one cannot be made to.)
    listener = await anyio.create_unix_listener(str(tmp_path / "mute.sock"))

    async def mute(stream: anyio.abc.SocketStream) -> None:
        await anyio.sleep_forever()

    async with anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, mute)
        started = time.monotonic()
        with pytest.raises(DockerUnavailable) as err:
            await open_attach(f"unix://{tmp_path}/mute.sock", "1.41", "abc", timeout=0.5)
        assert time.monotonic() - started < 10  # the listener never answers
        assert "did not answer an attach request within 0.5 s" in str(err.value)
        tg.cancel_scope.cancel()
