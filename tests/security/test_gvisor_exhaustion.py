"""Process exhaustion in gVisor sessions (sandbox/pidwatch.py), with runc beside for comparison.

Before: a bash fork bomb ended a 512 MiB gVisor session within a second, with no error: each
process under gVisor's ptrace platform costs the host 10-55 threads, and the sandbox died when
Docker's pids limit refused gVisor a thread. Now a gVisor session runs at most
``gvisor_processes(limits.pids)`` processes (RLIMIT_NPROC in gVisor's kernel, commands refused
at the limit, and a watch that kills the command holding the most processes), and its host
threads get room for them.

Each attack prints what happened and counts the sessions lost: landed must be 0. The session
must then answer a command, and, on gVisor, the call that met the limit says "process limit
reached".
"""

from __future__ import annotations

import time

import anyio
import pytest

from caisson import Runtime, Session
from caisson.docker.containers import gvisor_processes
from caisson.errors import CaissonError, OpError

pytestmark = pytest.mark.anyio

QUIET = "exec 2>/dev/null; "  # the bombs' own complaints would bury the daemon's note
BOMBS = {
    # The classic: returns at once, its processes outlive the call.
    "bash :(){ :|:& };:": ":(){ :|:& };:",
    # The same, with the calling shell staying, so the call itself meets the limit.
    "bash bomb, then waiting": QUIET + "bomb() { bomb | bomb & }; bomb; sleep 120",
    "python os.fork loop": QUIET + "python3 -c 'import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass'",
}
NOTE = "process limit reached"
# The call's timeout: under gVisor the watch must end a bomb well before it. On runc a bomb
# holds the pids limit until the timeout ends its tree, which a few seconds show as well.
BOMB_TIMEOUT = 20
RUNC_BOMB_TIMEOUT = 8


async def alive(s: Session) -> str | None:
    """Why the session does not answer a command (None: it does), within a generous minute."""
    deadline = time.monotonic() + 60
    while True:
        try:
            r = await s.exec("echo alive", timeout=30)
            if r.stdout == "alive\n":
                return None
            why = f"exit {r.exit_code}: {r.stderr[-200:]!r}"
        except CaissonError as exc:
            why = f"{type(exc).__name__}: {exc}"
            if "gone" in str(exc):
                return why
        if time.monotonic() > deadline:
            return why
        await anyio.sleep(1)


@pytest.mark.parametrize("runtime", ["gvisor", "runc"])
async def test_fork_bombs_end_the_bomb_not_the_session(rt: Runtime, runtime: str) -> None:
    gvisor = runtime == "gvisor"
    timeout = BOMB_TIMEOUT if gvisor else RUNC_BOMB_TIMEOUT
    tried = landed = noted = 0
    for name, bomb in BOMBS.items():
        for background in (False, True):
            async with rt.session(gvisor=gvisor, limits={"memory": "512m"}) as s:
                t0 = time.monotonic()
                if background:
                    task = await s.spawn(bomb, timeout=timeout)
                    await s.task_wait(task.task_id, timeout=timeout + 30)
                    out = await s.task_read(task.task_id, stderr_offset=0)
                    stderr = out.stderr
                else:
                    r = await s.exec(bomb, timeout=timeout)
                    stderr = r.stderr
                took = time.monotonic() - t0
                lost = await alive(s)
                tried += 1
                landed += lost is not None
                noted += NOTE in stderr
                print(f"{runtime}: {name}{' (background)' if background else ''}: call ended after {took:.1f} s, "
                      f"note {'given' if NOTE in stderr else 'absent'}; session {'LOST: ' + lost if lost else 'answers'}")
                if gvisor and name != "bash :(){ :|:& };:":  # the classic's call ends before the limit
                    assert NOTE in stderr and took < BOMB_TIMEOUT, (took, stderr[-300:])
    print(f"{runtime}: fork bombs in 512 MiB sessions: tried {tried}, landed {landed} (sessions lost), "
          f"{noted} calls said {NOTE!r}")
    assert landed == 0


async def test_150_noisy_tasks_then_a_memory_hog(rt: Runtime) -> None:
    async with rt.session(gvisor=True, limits={"memory": "512m"}) as s:
        started: list[str] = []
        refused: list[str] = []
        for i in range(150):
            try:
                task = await s.spawn(f"while :; do echo task {i} is noisy; done")
                started.append(task.task_id)
            except OpError as exc:
                assert exc.code == "process_limit" and NOTE in str(exc), exc
                refused.append(str(exc))
        await anyio.sleep(5)  # let them be noisy for a while
        limit = gvisor_processes(512)
        listed = await s.task_list()
        running = sum(t.running for t in listed)
        for t in listed:
            if not t.running:
                out = await s.task_read(t.task_id, max_bytes=4096)
                print(f"  {t.task_id} ended: exit {t.exit_code}, signal {t.signal}, stderr {out.stderr[-200:]!r}")
        # At its limit the session still answers, and a command is refused with the reason.
        await s.write_file("/workspace/still.txt", b"answering")
        assert await s.read_file("/workspace/still.txt") == b"answering"
        with pytest.raises(OpError, match=NOTE):
            for _ in range(3):  # the count may move by one as processes come and go
                await s.spawn("sleep 60")
        for task_id in started[:3]:
            out = await s.task_read(task_id, max_bytes=4096)
            assert "is noisy" in out.stdout
            await s.task_signal(task_id, "KILL")
        lost = await alive(s)
        print(f"150 noisy tasks: {len(started)} started, {len(refused)} refused "
              f"({refused[0] if refused else '-'}); limit {limit}; {running} still running; "
              f"after 3 killed, session {'LOST: ' + str(lost) if lost else 'answers'}")
        assert lost is None
        assert limit // 2 <= len(started) < limit and len(started) + len(refused) == 150
        assert running == len(started)  # refused at the limit, never killed for reaching it

        # A memory hog beside them: killed with a clear error, the session lives.
        r = await s.exec("python3 -c 'a = []\nwhile True: a.append(bytearray(50 << 20))'", timeout=60)
        print(f"memory hog after the tasks: exit {r.exit_code}, {r.stderr[-120:]!r}")
        assert "ran out of memory" in r.stderr
        assert await alive(s) is None

        for task_id in started:
            await s.task_signal(task_id, "KILL")
        r = await s.exec("python3 -c 'x = bytearray(64 << 20); print(len(x))'", timeout=60)
        assert r.stdout == f"{64 << 20}\n", r.stderr
