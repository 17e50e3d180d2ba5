"""Landlock levels for exec and spawn, and the daemon's channel out of the agent's reach.

All in a real container of the sandbox image, commands as the agent user.
"""

import json
import time

from daemon_client import Client, as_root, wait_for

SAFE = {"level": "safe"}
CAUTIOUS = {"level": "cautious", "write_roots": ["/workspace"]}
DANGEROUS = {"level": "dangerous"}


def attempt(box: Client, command: str, confine: dict | None, user: str = "agent") -> int:
    args = {"confine": confine} if confine is not None else {}
    result, _, _ = box.run(command, user=user, **args)
    if confine is not None:
        assert result["confined"] is True
    return result["exit_code"]


WRITES = {
    "create /workspace": ("touch /workspace/new-{n}", "test -e /workspace/new-{n}"),
    "modify /workspace": ("echo changed > /workspace/old-{n}", "grep -q changed /workspace/old-{n}"),
    "delete /workspace": ("rm /workspace/old-{n}", "test ! -e /workspace/old-{n}"),
    "mkdir /workspace": ("mkdir /workspace/dir-{n}", "test -d /workspace/dir-{n}"),
    "create /tmp": ("touch /tmp/new-{n}", "test -e /tmp/new-{n}"),
    "create /home/agent": ("touch /home/agent/new-{n}", "test -e /home/agent/new-{n}"),
}


def landed(box: Client, confine: dict, n: str) -> dict[str, bool]:
    as_root(box, f"echo old > /workspace/old-{n}; chown agent /workspace/old-{n}")
    found = {}
    for name, (command, check) in WRITES.items():
        attempt(box, command.format(n=n), confine)
        found[name] = box.run(check.format(n=n), user="root")[0]["exit_code"] == 0
    return found


def test_ping_reports_landlock(box: Client) -> None:
    result, _ = box.call("ping")
    assert result["landlock"] >= 1 and result["pid"] > 1


def test_safe_writes_nothing(box: Client) -> None:
    found = landed(box, SAFE, "safe")
    print("safe:", len(found), "writes attempted, landed:", [k for k, v in found.items() if v])
    assert not any(found.values())
    assert attempt(box, "echo hi > /dev/null && echo hi >/dev/zero && cat /etc/hostname >/dev/null && ls / >/dev/null", SAFE) == 0
    result, out, _ = box.run("cat /workspace/old-safe; echo $((6*7))", user="agent", confine=SAFE)
    assert out == b"old\n42\n"
    # Even root, confined safe, cannot write.
    assert attempt(box, "touch /etc/safe-root", SAFE, user="root") != 0
    assert box.run("test -e /etc/safe-root", user="root")[0]["exit_code"] == 1


def test_cautious_writes_only_beneath_its_roots(box: Client) -> None:
    found = landed(box, CAUTIOUS, "cautious")
    print("cautious:", len(found), "writes attempted, landed:", [k for k, v in found.items() if v])
    assert found == {
        "create /workspace": True,
        "modify /workspace": True,
        "delete /workspace": True,
        "mkdir /workspace": True,
        "create /tmp": False,
        "create /home/agent": False,
    }
    assert attempt(box, "touch /etc/cautious-root", CAUTIOUS, user="root") != 0  # root's DAC override does not help
    assert box.run("test -e /etc/cautious-root", user="root")[0]["exit_code"] == 1


def test_dangerous_writes_like_the_agent(box: Client) -> None:
    found = landed(box, DANGEROUS, "dangerous")
    print("dangerous: landed:", [k for k, v in found.items() if v])
    assert all(found.values())


def test_confined_commands_cannot_signal_outside_their_domain(box: Client) -> None:
    daemon_pid = box.call("ping")[0]["pid"]
    task = box.call("spawn", argv=["sleep", "300"], user="agent")[0]
    other = task["pid"]  # the agent's own process, but outside the confined domain
    try:
        for confine in (SAFE, CAUTIOUS, DANGEROUS):
            assert attempt(box, f"kill -0 {daemon_pid}", confine) != 0
            assert attempt(box, f"kill -0 {other}", confine) != 0
            assert attempt(box, "sleep 5 & kill $!", confine) == 0  # inside its own domain: fine
        assert attempt(box, f"kill -0 {other}", None) == 0  # unconfined: the agent may
    finally:
        box.call("task_signal", task_id=task["task_id"])


LISTEN = "import socket,time; s=socket.socket(); s.bind(('127.0.0.1', 8765)); s.listen(); print('up', flush=True); time.sleep(60)"
CONNECT = "python3 -c \"import socket; socket.create_connection(('127.0.0.1', 8765), timeout=2)\""


def test_no_tcp_without_network(box: Client) -> None:
    task = box.call("spawn", argv=["python3", "-c", LISTEN], user="agent")[0]["task_id"]
    try:
        assert box.call("task_read", task_id=task, wait=10)[1] == b"up\n"
        assert attempt(box, CONNECT, None) == 0
        for confine in (SAFE, CAUTIOUS, DANGEROUS):
            _, _, err = box.run(CONNECT, user="agent", confine=confine)
            assert b"PermissionError" in err, err
        assert attempt(box, CONNECT, dict(SAFE, network=True)) == 0
        bind = "python3 -c \"import socket; socket.socket().bind(('127.0.0.1', 8766))\""
        assert attempt(box, bind, SAFE) != 0 and attempt(box, bind, dict(SAFE, network=True)) == 0
    finally:
        box.call("task_signal", task_id=task)


def test_background_tasks_and_grandchildren_are_confined(box: Client) -> None:
    command = "touch /tmp/bg-direct; (setsid sh -c 'sleep 0.3; touch /tmp/bg-grandchild' &); sleep 0.6"
    task = box.call("spawn", command=command, user="agent", confine=SAFE)[0]
    assert task["confined"] is True
    status, _ = box.call("task_wait", task_id=task["task_id"], timeout=10)
    assert status["exit_code"] == 0
    time.sleep(0.2)
    tried = ["/tmp/bg-direct", "/tmp/bg-grandchild"]
    landed_files = [p for p in tried if box.run(f"test -e {p}", user="root")[0]["exit_code"] == 0]
    print("background:", len(tried), "writes attempted, landed:", landed_files)
    assert landed_files == []


def test_daemon_still_kills_confined_trees(box: Client) -> None:
    command = "(setsid sleep 401 &); sleep 402"
    started = time.monotonic()
    result, _, _ = box.run(command, user="agent", confine=SAFE, timeout=0.5)
    assert result["timed_out"] and time.monotonic() - started < 20  # the tree sleeps 400 s unless killed
    task = box.call("spawn", command="(setsid sleep 403 &); sleep 404", user="agent", confine=CAUTIOUS)[0]
    time.sleep(0.2)
    assert box.call("task_signal", task_id=task["task_id"])[0] == {"signalled": True}
    box.call("task_wait", task_id=task["task_id"], timeout=5)

    def left() -> bytes:
        return box.run("pgrep -f 'sleep 40[1-4]' || true", user="root")[1]

    assert wait_for(lambda: left() == b"", timeout=3.0), left()


# ---------------------------------------------------------------- the daemon's channel


def test_commands_hold_only_their_own_stdio(box: Client) -> None:
    task = box.call("spawn", argv=["sleep", "30"], user="agent")[0]
    confined = box.call("spawn", argv=["sleep", "30"], user="agent", confine=SAFE)[0]
    try:
        for pid in (task["pid"], confined["pid"]):
            fds = as_root(box, f"ls /proc/{pid}/fd").split()
            assert fds == [b"0", b"1", b"2"], fds
        # exec too: the command lists its own descriptors (3 is ls's own directory handle).
        _, out, _ = box.run("ls /proc/self/fd", user="agent")
        assert out.split() == [b"0", b"1", b"2", b"3"]
        _, out, _ = box.run("readlink /proc/self/fd/0", user="agent")
        assert out == b"/dev/null\n"  # a command given no stdin reads nothing, from nowhere
    finally:
        box.call("task_signal", task_id=task["task_id"])
        box.call("task_signal", task_id=confined["task_id"])


def test_agent_cannot_reach_the_daemons_descriptors(box: Client) -> None:
    pid = box.call("ping")[0]["pid"]
    for target in (pid, 1):  # the daemon, and docker-init holding the attach stream
        for confine in (None, DANGEROUS):
            args = {"confine": confine} if confine else {}
            result, _, err = box.run(f"echo injected > /proc/{target}/fd/1", user="agent", **args)
            assert result["exit_code"] != 0 and b"Permission denied" in err, err
            result, _, err = box.run(f"ls /proc/{target}/fd", user="agent", **args)
            assert result["exit_code"] != 0 and b"Permission denied" in err, err
    assert box.call("ping")[0]["pid"] == pid  # the channel still carries only frames


# Run by the agent: every root process the daemon keeps waiting (the spawner, the clones made
# ahead), found at that moment from /proc, and attacked through its descriptors (each number a
# socket could have), its memory, ptrace, its signals and its environment. Prints a report.
_TAKE_OVER = """
import ctypes, errno, json, os, signal, sys
daemon = int(sys.argv[1])
targets, tried, landed, refusals = [], 0, 0, set()
for name in filter(str.isdigit, os.listdir("/proc")):
    try:
        stat = open("/proc/%s/stat" % name).read()
        owner = os.stat("/proc/" + name).st_uid
    except OSError:
        continue
    comm, rest = stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2 :].split()
    if int(rest[1]) == daemon and comm in ("python3", "clone-exec") and owner == 0 and int(name) != os.getpid():
        targets.append(int(name))
libc = ctypes.CDLL(None, use_errno=True)
def attempt(action):
    global tried, landed
    tried += 1
    try:
        action()
        landed += 1
    except OSError as exc:
        refusals.add(errno.errorcode.get(exc.errno, str(exc.errno)))
def ptrace(pid):  # PTRACE_SEIZE: attaches without stopping the process
    if libc.ptrace(0x4206, pid, None, None) != 0:
        raise OSError(ctypes.get_errno(), "ptrace")
for pid in targets:
    for fd in range(16):
        attempt(lambda: os.close(os.open("/proc/%d/fd/%d" % (pid, fd), os.O_WRONLY)))
    attempt(lambda: os.close(os.open("/proc/%d/mem" % pid, os.O_RDWR)))
    attempt(lambda: open("/proc/%d/environ" % pid).read())
    attempt(lambda: ptrace(pid))
    if sys.argv[2:] != ["control"]:  # a control run (as root) must not stop the spawner
        attempt(lambda: os.kill(pid, signal.SIGSTOP))
print(json.dumps({"targets": len(targets), "tried": tried, "landed": landed, "refusals": sorted(refusals)}))
"""

# The agent's attempt to use clone-exec itself: a request for root's ids, handed to a copy it
# runs as itself. Prints the exit status, the stage and errno reported, and what ran.
_OWN_CLONE = """
import array, os, socket, struct, subprocess, sys
sys.path.insert(0, "/opt/caisson")
from sandbox import clone_request
ours, theirs = socket.socketpair()
spawner = subprocess.Popen(["/opt/caisson/sandbox/clone-exec"], close_fds=False,
                           preexec_fn=lambda: os.dup2(theirs.fileno(), 3))
theirs.close()
ours.send(b"n")
made, ancillary, _, _ = ours.recvmsg(8, socket.CMSG_SPACE(4))
pid, _ = struct.unpack("<ii", made)
clone = socket.socket(fileno=array.array("i", ancillary[0][2])[0])
r, w = os.pipe()
request = clone_request.encode(["id", "-u"], ["/usr/bin/id"], "/", {}, (0, 0, [0]), 0)
clone.sendmsg([request], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [w, w]))])
os.close(w)
report = clone.recv(5)
print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), *struct.unpack("<Bi", report), repr(os.read(r, 100)))
"""


def test_agent_cannot_take_over_a_waiting_clone(box: Client) -> None:
    """A clone made ahead runs as root until its command arrives: the agent goes for its
    socket, memory, ptrace, signals and environment, and runs clone-exec itself for root's ids."""
    daemon = box.call("ping")[0]["pid"]
    box.run("true", user="agent")  # a session that has run a command keeps two clones ahead
    tried = landed = 0
    for confine in (None, DANGEROUS):
        args = {"confine": confine} if confine else {}
        result, out = box.call("exec", argv=["python3", "-c", _TAKE_OVER, str(daemon)], user="agent", **args)
        assert result["exit_code"] == 0, out
        report = json.loads(out[: result["stdout_len"]])
        assert report["targets"] >= 2, report  # the spawner and at least one clone
        assert set(report["refusals"]) <= {"EACCES", "EPERM"}, report  # refused, not missed
        tried, landed = tried + report["tried"], landed + report["landed"]
    if box.call("ping")[0]["clone_exec"]:
        tried += 1
        result, out, err = box.run(f"python3 -c '{_OWN_CLONE}'", user="agent")
        assert result["exit_code"] == 0, err
        code, stage, errno_, output = out.decode().split(maxsplit=3)
        landed += code != "127" or output.strip() != "b''"
        assert (stage, errno_) == ("4", "1"), out  # the ids stage, EPERM: nothing ran
    print(f"waiting clones: {tried} attacks by the agent, {landed} landed")
    assert landed == 0
    # The control: as root, the same script reaches them (it can tell reached from refused).
    result, out = box.call("exec", argv=["python3", "-c", _TAKE_OVER, str(daemon), "control"], user="root")
    assert result["exit_code"] == 0, out
    assert json.loads(out[: result["stdout_len"]])["landed"] > 0
    result, out, _ = box.run("echo still served", user="agent")
    assert (result["exit_code"], out) == (0, b"still served\n")


def test_a_replaced_write_root_is_followed_not_the_old_one(box: Client) -> None:
    """The daemon reuses a confinement's ruleset while its paths name the same directories: a
    root moved away and made anew must be writable, and the old one, now elsewhere, not."""
    roots = {"level": "cautious", "write_roots": ["/workspace/root-swap"]}
    as_root(box, "mkdir -p /workspace/root-swap && chown agent /workspace/root-swap")
    assert attempt(box, "touch /workspace/root-swap/first", roots) == 0
    landed = 0
    for n in range(5):
        # The agent may do this itself: both directories are its own.
        assert box.run(
            f"mv /workspace/root-swap /workspace/moved-{n} && mkdir /workspace/root-swap", user="agent"
        )[0]["exit_code"] == 0
        assert attempt(box, f"touch /workspace/root-swap/new-{n}", roots) == 0
        landed += attempt(box, f"touch /workspace/moved-{n}/stale-{n}", roots) == 0
    print(f"5 write roots replaced: {landed} writes into a replaced root landed")
    assert landed == 0


def test_safe_changes_no_metadata_cautious_still_does(box: Client) -> None:
    """Landlock has no right for metadata: at safe a seccomp filter refuses it, in native and
    Python clones alike; a bash call's safe command kept writable for its state too."""
    changes = [
        "chmod 777 /workspace/meta-{n}",
        "touch -d 2000-01-01 /workspace/meta-{n}",
        "chown agent /workspace/meta-{n}",
        "python3 -c 'import os; os.fchmod(os.open(\"/workspace/meta-{n}\", os.O_RDONLY), 0o777)'",
        "perl -e 'utime 1, 1, \"/workspace/meta-{n}\"'",
    ]
    kept = {"level": "cautious", "write_roots": ["/tmp/.state"], "metadata": False}
    landed = {}
    for name, confine in (("safe", SAFE), ("kept", kept), ("cautious", CAUTIOUS)):
        landed[name] = 0
        for i, change in enumerate(changes):
            n = f"{name}-{i}"
            as_root(box, f"echo x > /workspace/meta-{n}; chown agent /workspace/meta-{n}; touch -d 2020-02-02 /workspace/meta-{n}")  # noqa: E501
            before = box.run(f"stat -c '%a %y %z' /workspace/meta-{n}", user="root")[1]
            attempt(box, change.format(n=n), confine)
            landed[name] += box.run(f"stat -c '%a %y %z' /workspace/meta-{n}", user="root")[1] != before
    print("metadata changes tried", len(changes), "per level, landed:", landed)
    assert landed == {"safe": 0, "kept": 0, "cautious": len(changes)}
    # A bad value is refused, not taken for "allowed".
    assert box.error("exec", argv=["true"], confine={"level": "safe", "metadata": "no"}).code == "bad_request"
