"""What a started command is, whichever way the daemon starts it: the daemon's child, in a
new session, OOM score 1000, a child subreaper, confined when asked, with the user's ids
and only its own stdio.

All in a real container of the sandbox image (daemon as root, agent user uid 1000).
"""

import re

from daemon_client import Client, as_root

SAFE = {"level": "safe"}


def status(box: Client, pid: int) -> dict[str, str]:
    text = as_root(box, f"cat /proc/{pid}/status").decode()
    return dict(re.findall(r"^(\w+):\s*(.*)$", text, re.M))


def stat_fields(box: Client, pid: int) -> list[str]:
    """/proc/<pid>/stat from the state on (field 3 is index 0: ppid at 1, session at 3)."""
    return as_root(box, f"cat /proc/{pid}/stat").decode().rsplit(")", 1)[1].split()


def test_a_task_is_the_daemons_child_with_everything_set_up(box: Client) -> None:
    daemon_pid = box.call("ping")[0]["pid"]
    groups = set(as_root(box, "id -G agent").decode().split())
    for confine in (None, SAFE):
        args = {"confine": confine} if confine else {}
        task = box.call("spawn", argv=["sleep", "30"], user="agent", **args)[0]
        pid = task["pid"]
        try:
            fields = stat_fields(box, pid)
            assert int(fields[1]) == daemon_pid  # reaped, timed out and killed by the daemon
            assert int(fields[3]) == pid  # a session of its own
            st = status(box, pid)
            assert st["Uid"].split() == ["1000"] * 4 and st["Gid"].split() == ["1000"] * 4
            assert set(st["Groups"].split()) == groups
            assert as_root(box, f"cat /proc/{pid}/oom_score_adj") == b"1000\n"
            assert as_root(box, f"ls /proc/{pid}/fd").split() == [b"0", b"1", b"2"]
        finally:
            box.call("task_signal", task_id=task["task_id"])


def test_a_command_is_a_subreaper(box: Client) -> None:
    # The subshell exits at once: its sleep is orphaned, and must come to the command.
    task = box.call("spawn", command="(sleep 31 &); exec sleep 32", user="agent")[0]
    try:
        found = b""
        for _ in range(50):
            found = as_root(box, "pgrep -x -f 'sleep 31' || true").strip()
            if found:
                break
        assert found, "the orphan never started"
        assert int(stat_fields(box, int(found))[1]) == task["pid"]
    finally:
        box.call("task_signal", task_id=task["task_id"])


def test_confined_command_cannot_write_and_unconfined_can(box: Client) -> None:
    result, _, _ = box.run("touch /workspace/spawn-confined", user="agent", confine=SAFE)
    assert result["confined"] is True and result["exit_code"] != 0
    assert box.run("test -e /workspace/spawn-confined", user="root")[0]["exit_code"] == 1
    # The clone that ran the confined command is gone: the next one starts unconfined.
    assert box.run("touch /workspace/spawn-free", user="agent")[0]["exit_code"] == 0


def test_error_codes_in_the_container(box: Client) -> None:
    assert box.error("exec", argv=["no-such-program-here"]).code == "command_not_found"
    assert box.error("exec", argv=["/etc/hostname"]).code == "not_executable"
    assert box.error("exec", argv=["/workspace"]).code == "not_executable"
    assert box.error("exec", argv=["true"], cwd="/no/such/dir").code == "cwd_not_found"
    assert box.error("exec", argv=["true"], user="no-such-user-here").code == "no_such_user"


def test_commands_still_start_after_the_spawner_dies(box: Client) -> None:
    daemon_pid = box.call("ping")[0]["pid"]
    # The spawner and the clone it made ahead are the daemon's python3 (or clone-exec) children.
    pattern = "(python3|clone-exec)"
    killed = as_root(box, f"pids=$(pgrep -P {daemon_pid} -x '{pattern}'); kill -9 $pids; echo $pids").split()
    # At least the spawner and its waiting clone; a clone being made at that moment is a third.
    assert len(killed) >= 2, killed
    for _ in range(3):
        result, out, _ = box.run("echo alive", user="agent")
        assert (result["exit_code"], out) == (0, b"alive\n")
    assert box.call("ping")[0]["pid"] == daemon_pid
