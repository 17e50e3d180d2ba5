"""exec, background tasks and process-tree killing."""

import os
import pwd
import time
from pathlib import Path

import pytest
from daemon_client import ROOT, Client, marked_pids, start_daemon, wait_for


def cmdline_pids(daemon: Client, *needles: str) -> list[int]:
    """Live processes of this daemon whose command line contains one of ``needles``."""
    found = []
    for pid in marked_pids(daemon.mark):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                cmdline = handle.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if any(n in cmdline for n in needles):
            found.append(pid)
    return found


# ---------------------------------------------------------------- exec


def test_exec_exit_code_and_streams(daemon: Client) -> None:
    result, out, err = daemon.run("echo out; echo err >&2; exit 3")
    assert (result["exit_code"], result["signal"], result["timed_out"]) == (3, None, False)
    assert out == b"out\n" and err == b"err\n"
    assert result["stdout_total"] == 4 and result["stderr_total"] == 4
    assert result["stdout_truncated"] is False and result["duration"] >= 0
    assert daemon.run("true")[0]["exit_code"] == 0


def test_exec_argv_without_shell(daemon: Client) -> None:
    result, blob = daemon.call("exec", argv=["printf", "%s|", "a b", "$HOME", "*"])
    assert blob == b"a b|$HOME|*|" and result["exit_code"] == 0
    assert daemon.error("exec", argv=["/no/such/binary"]).code == "command_not_found"
    assert daemon.error("exec", argv=[]).code == "bad_request"
    assert daemon.error("exec", argv=["true"], command="true").code == "bad_request"
    assert daemon.error("exec").code == "bad_request"


def test_exec_killed_by_signal(daemon: Client) -> None:
    result, _, _ = daemon.run("kill -9 $$")
    assert result["exit_code"] is None and result["signal"] == 9 and result["timed_out"] is False


def test_exec_env_and_cwd(daemon: Client, tmp_path: Path) -> None:
    script = "pwd; echo $FOO; echo $HOME $USER; echo ${DAEMON_TEST_MARK:+inherited}; echo ${CAISSON_WORKSPACE:-hidden}"
    _, out, _ = daemon.run(script)
    me = pwd.getpwuid(os.geteuid())
    expected = [str(daemon.workspace), "", f"{me.pw_dir} {me.pw_name}", "inherited", "hidden"]
    assert out.decode().splitlines() == expected

    env = {"FOO": "bar", "DAEMON_TEST_MARK": None}  # null unsets a variable
    _, out, _ = daemon.run("pwd; echo $FOO; echo ${DAEMON_TEST_MARK:-unset}", cwd=str(tmp_path), env=env)
    assert out.decode().splitlines() == [str(tmp_path), "bar", "unset"]
    assert daemon.error("exec", command="true", cwd=str(tmp_path / "missing")).code == "cwd_not_found"
    (tmp_path / "plain").write_text("x")
    assert daemon.error("exec", command="true", cwd=str(tmp_path / "plain")).code == "cwd_not_found"
    assert daemon.error("exec", argv=["no-such-program-here"]).code == "command_not_found"
    assert daemon.error("exec", argv=[str(tmp_path / "plain")]).code == "not_executable"
    assert daemon.error("exec", argv=["true"], user="no-such-user-here").code == "no_such_user"
    assert daemon.error("exec", command="true", cwd="relative").code == "bad_request"
    assert daemon.error("exec", command="true", env={"A": 1}).code == "bad_request"


@pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root")
def test_exec_as_other_user(daemon: Client) -> None:
    result, out, _ = daemon.run("id -u; id -g; echo $HOME $USER", user=1000)
    uid_line, gid_line, rest = out.decode().splitlines()
    assert (uid_line, gid_line) == ("1000", "1000")
    try:
        entry = pwd.getpwuid(1000)
        assert rest == f"{entry.pw_dir} {entry.pw_name}"
    except KeyError:  # a uid without a passwd entry
        assert rest == "/ 1000"
    assert daemon.run("id -u", user="root")[1] == b"0\n"
    assert daemon.error("exec", command="true", user="no-such-user-xyz").code == "no_such_user"


def test_exec_stdin(daemon: Client) -> None:
    data = os.urandom(300000)  # larger than a pipe buffer
    result, blob = daemon.call("exec", data, argv=["cat"])
    assert blob == data and result["stdout_len"] == len(data)
    result, out, _ = daemon.run("head -c 5", b"hello world")
    assert out == b"hello"
    result, out, _ = daemon.run("true", b"x" * 1000000)  # ignores its stdin: no hang
    assert result["exit_code"] == 0
    assert daemon.run("cat")[1] == b""  # no stdin: EOF at once


def test_exec_caps_and_truncation(daemon: Client) -> None:
    result, out, err = daemon.run(
        "head -c 100000 /dev/zero; head -c 5000 /dev/zero >&2", stdout_max=1000, stderr_max=10
    )
    assert out == b"\0" * 1000 and err == b"\0" * 10
    assert result["stdout_total"] == 100000 and result["stderr_total"] == 5000
    assert result["stdout_truncated"] and result["stderr_truncated"]
    assert daemon.error("exec", command="true", stdout_max=-1).code == "bad_request"


def test_exec_does_not_wait_for_detached_background(daemon: Client) -> None:
    started = time.monotonic()
    result, out, _ = daemon.run("sleep 101 & echo started")
    assert out == b"started\n" and result["exit_code"] == 0
    # Far below the background job's 101 s: not waited for (room for a busy machine).
    assert time.monotonic() - started < 10.0
    assert cmdline_pids(daemon, "sleep 101")  # still running: a background job, killed at daemon exit


def test_exec_timeout_kills_detached_tree(daemon: Client) -> None:
    command = "setsid bash -c 'trap \"\" TERM; sleep 300' & (setsid sleep 301 &); echo begun; sleep 100"
    started = time.monotonic()
    result, out, _ = daemon.run(command, timeout=1.0)
    elapsed = time.monotonic() - started
    assert result["timed_out"] is True and result["exit_code"] is None and result["signal"] == 9
    assert out == b"begun\n"
    assert 0.9 < elapsed < 10.0, elapsed  # the tree holds on for 100-300 s unless killed
    assert wait_for(lambda: not cmdline_pids(daemon, "sleep 300", "sleep 301", "sleep 100"), timeout=3.0)


def test_exec_timeout_kills_forking_loop(daemon: Client) -> None:
    # A tree that keeps forking cannot outrun the stop-then-kill sweep.
    result, _, _ = daemon.run("while true; do (sleep 302 &); done", timeout=0.5)
    assert result["timed_out"]
    assert wait_for(lambda: not cmdline_pids(daemon, "sleep 302"), timeout=3.0)


# ---------------------------------------------------------------- tasks


def read_all(daemon: Client, task_id: str, wait: float = 2.0, max_bytes: int = 1 << 20) -> tuple[bytes, bytes, dict]:
    """task_read until the task finished and everything was read."""
    out, err = b"", b""
    offsets = {"stdout_offset": 0, "stderr_offset": 0}
    while True:
        result, blob = daemon.call("task_read", task_id=task_id, wait=wait, max_bytes=max_bytes, **offsets)
        assert result["stdout_offset"] == offsets["stdout_offset"] + result["stdout_len"] or result["stdout_dropped"]
        out += blob[: result["stdout_len"]]
        err += blob[result["stdout_len"] :]
        offsets = {"stdout_offset": result["stdout_offset"], "stderr_offset": result["stderr_offset"]}
        if not result["running"] and not blob:
            return out, err, result


def test_spawn_incremental_read_loses_nothing(daemon: Client) -> None:
    command = "for i in $(seq 1 300); do echo out$i; echo err$i >&2; [ $((i % 50)) = 0 ] && sleep 0.05; done; exit 7"
    result, _ = daemon.call("spawn", command=command, name="counter")
    task_id = result["task_id"]
    assert task_id.startswith("t") and result["pid"] > 0
    out, err, status = read_all(daemon, task_id, max_bytes=700)  # small reads: many round trips
    assert out.decode().split() == [f"out{i}" for i in range(1, 301)]
    assert err.decode().split() == [f"err{i}" for i in range(1, 301)]
    assert status["exit_code"] == 7 and status["running"] is False
    assert status["stdout_dropped"] == 0 and status["stderr_dropped"] == 0

    # A reader that reconnects from offset 0 gets it all again.
    again, blob = daemon.call("task_read", task_id=task_id)
    assert blob[: again["stdout_len"]] == out and blob[again["stdout_len"] :] == err


def test_task_read_long_poll(daemon: Client) -> None:
    task_id = daemon.call("spawn", command="sleep 0.3; echo late")[0]["task_id"]
    started = time.monotonic()
    result, blob = daemon.call("task_read", task_id=task_id, wait=30)
    assert blob == b"late\n" and 0.2 < time.monotonic() - started < 20  # at the output, not at wait=30
    result, blob = daemon.call("task_read", task_id=task_id, stdout_offset=result["stdout_offset"], wait=5)
    assert blob == b"" and result["running"] is False and result["exit_code"] == 0
    assert daemon.error("task_read", task_id=task_id, stdout_offset=10**6).code == "bad_request"
    assert daemon.error("task_read", task_id="t999").code == "no_such_task"


def test_task_output_ring_buffer(daemon: Client) -> None:
    task_id = daemon.call("spawn", command="seq 1 20000", output_max=1000)[0]["task_id"]
    daemon.call("task_wait", task_id=task_id, timeout=10)
    result, blob = daemon.call("task_read", task_id=task_id)
    expected = "".join(f"{i}\n" for i in range(1, 20001)).encode()
    assert blob == expected[-1000:]
    assert result["stdout_dropped"] == len(expected) - 1000 and result["stdout_offset"] == len(expected)


def test_task_write_and_close(daemon: Client) -> None:
    task_id = daemon.call("spawn", argv=["cat"])[0]["task_id"]
    assert daemon.call("task_write", b"hello\n", task_id=task_id)[0] == {"written": 6}
    result, blob = daemon.call("task_read", task_id=task_id, wait=5)
    assert blob == b"hello\n" and result["running"] is True
    daemon.call("task_write", b"bye\n", task_id=task_id, close=True)
    status, _ = daemon.call("task_wait", task_id=task_id, timeout=5)
    assert status["running"] is False and status["exit_code"] == 0 and status["stdout_offset"] == 10
    assert daemon.error("task_write", b"more", task_id=task_id).code == "bad_request"


def test_spawn_with_initial_stdin(daemon: Client) -> None:
    task_id = daemon.call("spawn", b"abc", argv=["cat"], stdin=False)[0]["task_id"]
    status, _ = daemon.call("task_wait", task_id=task_id, timeout=5)
    assert status["exit_code"] == 0
    assert daemon.call("task_read", task_id=task_id)[1] == b"abc"


def test_task_signal(daemon: Client) -> None:
    task_id = daemon.call("spawn", command="trap 'echo got-term; exit 5' TERM; echo ready; while true; do sleep 0.05; done")[0]["task_id"]
    assert daemon.call("task_read", task_id=task_id, wait=5)[1] == b"ready\n"
    assert daemon.call("task_signal", task_id=task_id, signal="TERM")[0] == {"signalled": True}
    status, _ = daemon.call("task_wait", task_id=task_id, timeout=5)
    assert status["exit_code"] == 5
    result, blob = daemon.call("task_read", task_id=task_id)
    assert blob[: result["stdout_len"]] == b"ready\ngot-term\n"  # the tree got TERM: sleep too
    assert daemon.call("task_signal", task_id=task_id)[0] == {"signalled": False}  # already gone

    task_id = daemon.call("spawn", argv=["sleep", "303"])[0]["task_id"]
    assert daemon.call("task_signal", task_id=task_id, signal=15, tree=False)[0] == {"signalled": True}
    status, _ = daemon.call("task_wait", task_id=task_id, timeout=5)
    assert status["signal"] == 15 and status["exit_code"] is None
    assert daemon.error("task_signal", task_id=task_id, signal="NOPE").code == "bad_request"


def test_task_kill_tree(daemon: Client) -> None:
    command = "setsid bash -c 'trap \"\" TERM; sleep 304' & (setsid sleep 305 &); echo up; sleep 306"
    task_id = daemon.call("spawn", command=command)[0]["task_id"]
    assert daemon.call("task_read", task_id=task_id, wait=5)[1] == b"up\n"
    assert wait_for(lambda: len(cmdline_pids(daemon, "sleep 304", "sleep 305", "sleep 306")) == 3)
    assert daemon.call("task_signal", task_id=task_id, signal="KILL")[0] == {"signalled": True}
    status, _ = daemon.call("task_wait", task_id=task_id, timeout=5)
    assert status["running"] is False and status["signal"] == 9
    assert wait_for(lambda: not cmdline_pids(daemon, "sleep 304", "sleep 305", "sleep 306"), timeout=3.0)


def test_background_timeout(daemon: Client) -> None:
    task_id = daemon.call("spawn", command="(setsid sleep 307 &); echo hi; sleep 308", timeout=0.5)[0]["task_id"]
    status, _ = daemon.call("task_wait", task_id=task_id, timeout=5)
    assert status["running"] is False and status["timed_out"] is True and status["signal"] == 9
    assert daemon.call("task_read", task_id=task_id)[1] == b"hi\n"
    assert wait_for(lambda: not cmdline_pids(daemon, "sleep 307", "sleep 308"), timeout=3.0)


def test_task_wait_timeout_and_list(daemon: Client) -> None:
    long_id = daemon.call("spawn", argv=["sleep", "309"], name="sleeper")[0]["task_id"]
    short_id = daemon.call("spawn", command="echo -n abc; echo -n de >&2")[0]["task_id"]
    status, _ = daemon.call("task_wait", task_id=long_id, timeout=0.1)
    assert status["running"] is True and status["exit_code"] is None
    daemon.call("task_wait", task_id=short_id, timeout=5)
    tasks = {t["task_id"]: t for t in daemon.call("task_list")[0]["tasks"]}
    assert tasks[long_id]["running"] is True and tasks[long_id]["name"] == "sleeper"
    assert tasks[long_id]["command"] == "sleep 309" and tasks[long_id]["ended"] is None
    short = tasks[short_id]
    assert short["running"] is False and short["exit_code"] == 0
    assert (short["stdout_total"], short["stderr_total"]) == (3, 2)
    assert short["ended"] >= short["started"] > 0
    daemon.call("task_signal", task_id=long_id)
    daemon.call("task_wait", task_id=long_id, timeout=5)
    assert len(daemon.call("task_list")[0]["tasks"]) == 2  # finished tasks stay listed


def test_tasks_killed_when_daemon_exits(daemon: Client) -> None:
    daemon.call("spawn", command="(setsid sleep 310 &); sleep 311")
    daemon.call("exec", command="setsid sleep 312 &")  # an orphan the daemon adopted
    assert wait_for(lambda: len(cmdline_pids(daemon, "sleep 310", "sleep 311", "sleep 312")) == 3)
    assert daemon.close() == 0
    assert wait_for(lambda: not marked_pids(daemon.mark), timeout=3.0)


def test_own_pythonpath_entry_not_inherited(tmp_path: Path) -> None:
    client = start_daemon(tmp_path, env={"PYTHONPATH": f"{ROOT}:/opt/other"})
    try:
        client.call("ping")
        _, blob = client.call("exec", command="echo $PYTHONPATH")
        assert blob == b"/opt/other\n"
    finally:
        assert client.close() == 0


def test_killed_groups_are_forgotten_once_none_of_them_runs() -> None:
    """The daemon keeps the pids each killed marker group was sent SIGKILL (a member not
    among them escaped the kill). The process watch forgets a group once a look begun after
    its kill finds none of it running; before, the record grew with every killed command for
    the session's life. A group still running, or killed after the look began, is kept."""
    import threading

    from caisson._sandbox import proctree

    lock = threading.Lock()
    before = time.monotonic()
    proctree._killed.clear()
    for marker in (900_001, 900_002, 900_003):
        proctree._killed[marker] = (before, {4_000_000 + marker})
    looked = time.monotonic()
    proctree._killed[900_004] = (time.monotonic() + 1, {4_900_004})  # killed after the look began
    try:
        proctree.kill_escapes({900_002}, looked, lock)  # 900_002 still has a running member
        assert sorted(proctree._killed) == [900_002, 900_004]
        proctree.kill_escapes(set(), time.monotonic() + 2, lock)
        assert proctree._killed == {}
    finally:
        proctree._killed.clear()
