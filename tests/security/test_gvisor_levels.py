"""The permission levels under gVisor, where there is no Landlock: read-only views and chroot
(sandbox/views.py) must hold what Landlock holds on runc.

* The bypass corpus of test_bash_live, weaponised the same way, in gVisor sessions with
  deny-all approvals: under the default policy, at ``max_level="safe"``, with the classifier
  blinded (only the kernel stands), and as background tasks.
* A level matrix through the kernel alone (the session's confined client, no classifier):
  many programs and ways to write (python3, perl, dd, tee, install, mv, ln, mkfifo, cp,
  /dev/shm, /tmp, home, a hard link, metadata), at safe and at cautious, on gVisor and on
  runc alike; each write is checked by root afterwards.
* Ways out of a view: /proc/<pid>/root and cwd of an unconfined agent process running
  beside it, chroot again, the views' own directory, /proc/1/root.

Each prints tried/landed; landed must be 0. Controls show the same writes land at dangerous.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from caisson import Runtime, Session
from caisson._sandbox.views import BASE
from caisson.client.models import Confinement
from caisson.docker.containers import LEASE_PATH
from caisson.policy import BashClassification, Level, Policy
from tests.security.test_bash_live import COMMANDS, deny, prepare, run_all
from tests.security.test_bash_live import changes as all_changes

pytestmark = pytest.mark.anyio


# Root's own bookkeeping, not the agent's writes: the daemon's views and the host's lease.
OWN = (BASE, LEASE_PATH)


async def changes(s: Session, *, outside_only: bool) -> list[str]:
    return [p for p in await all_changes(s, outside_only=outside_only) if not p.startswith(OWN)]


def blind(command: str, **_: object) -> BashClassification:
    return BashClassification(level=Level.SAFE, reasons=["blinded"], destructive=None, segments=[], residual=Level.SAFE)


@pytest.fixture
async def gvisor(rt: Runtime) -> AsyncIterator[Session]:
    async with rt.session(gvisor=True, approval_handler=deny) as s:
        assert s.info is not None and s.info.levels == "views", s.info
        await prepare(s)
        yield s


async def test_a_safe_command_runs_on_gvisor_without_an_approval_handler(rt: Runtime) -> None:
    async with rt.session(gvisor=True) as s:
        await s.exec("cd /workspace && git init -q . && echo hi > notes.txt && chown -R agent: .", user="root")
        for command in ("ls", "cat notes.txt", "git status --short", "pwd"):
            r = await s.call("bash", {"command": command})
            assert r.ok and r.decision != "denied", (command, r.text)
        r = await s.call("bash", {"command": "cat notes.txt"})
        assert "hi" in r.text
        # cautious is enforced too, so it runs (auto-approved) and writes in the workspace only.
        r = await s.call("bash", {"command": "echo made > made.txt && cat made.txt"})
        assert r.ok and "made" in r.text, r.text


async def test_deny_all_default_policy(gvisor: Session) -> None:
    ran, leaked = await run_all(gvisor)
    outside = await changes(gvisor, outside_only=True)
    print(f"gVisor, default policy, deny-all approvals: tried {len(COMMANDS)}, {ran} ran, "
          f"landed {len(outside)} changes outside the workspace roots, {leaked} secret leaks", outside)
    assert (outside, leaked) == ([], 0)


async def test_blind_classifier_kernel_still_refuses_writes(rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("caisson.policy.engine.classify_bash", blind)
    async with rt.session(gvisor=True, approval_handler=deny) as s:
        await prepare(s)
        ran, _ = await run_all(s)
        written = await changes(s, outside_only=False)
    print(f"gVisor, classifier blinded: tried {len(COMMANDS)}, {ran} ran at level safe, landed {len(written)}", written)
    assert ran == len(COMMANDS) and written == []


async def test_max_level_safe_writes_nothing(rt: Runtime) -> None:
    async with rt.session(gvisor=True, approval_handler=deny, policy=Policy(max_level=Level.SAFE)) as s:
        await prepare(s)
        ran, leaked = await run_all(s)
        written = await changes(s, outside_only=False)
    print(f"gVisor, max_level safe: tried {len(COMMANDS)}, {ran} ran, landed {len(written)}, {leaked} secret leaks")
    assert (written, leaked) == ([], 0)


async def test_background_escapes_stay_confined(rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("caisson.policy.engine.classify_bash", blind)
    escapes = [
        "sleep 0.3; touch /var/tmp/bg-1",
        "(setsid sh -c 'sleep 0.3; touch /var/tmp/bg-2' &); sleep 1",
        "nohup sh -c 'sleep 0.3; echo x > /var/tmp/bg-3' >/dev/null 2>&1 & sleep 1",
        "python3 -c \"import os,time; os.fork() or (time.sleep(0.3), open('/var/tmp/bg-4','w'))\"; sleep 1",
        "sleep 0.3; touch /workspace/bg-5",
    ]
    async with rt.session(gvisor=True, approval_handler=deny) as s:
        await prepare(s)
        for command in escapes:
            r = await s.call("bash", {"command": command, "run_in_background": True})
            assert r.ok, r.text
        await s.exec("sleep 2")
        written = await changes(s, outside_only=False)
    print(f"gVisor, background escapes at level safe: tried {len(escapes)}, landed {len(written)}", written)
    assert written == []


# (command, check as root): a write lands when the check succeeds afterwards.
MATRIX = [
    ("python3 -c \"open('{d}/py-{n}', 'w').write('x')\"", "test -e {d}/py-{n}"),
    ("perl -e 'open(F, \">{d}/pl-{n}\"); print F 1'", "test -s {d}/pl-{n}"),
    ("dd if=/dev/zero of={d}/dd-{n} bs=1 count=1", "test -e {d}/dd-{n}"),
    ("echo x | tee {d}/tee-{n}", "test -e {d}/tee-{n}"),
    ("install /etc/hostname {d}/inst-{n}", "test -e {d}/inst-{n}"),
    ("mv {d}/victim {d}/mv-{n}", "test -e {d}/mv-{n}"),
    ("ln -s /etc/passwd {d}/ln-{n}", "test -L {d}/ln-{n}"),
    ("ln {d}/victim {d}/hard-{n}", "test -e {d}/hard-{n}"),
    ("mkfifo {d}/fifo-{n}", "test -p {d}/fifo-{n}"),
    ("cp /etc/hostname {d}/cp-{n}", "test -e {d}/cp-{n}"),
    ("mkdir {d}/dir-{n}", "test -d {d}/dir-{n}"),
    ("echo gone > {d}/victim", "grep -q gone {d}/victim"),
    ("rm -f {d}/victim", "test ! -e {d}/victim"),
    ("truncate -s 0 {d}/victim", "test ! -s {d}/victim"),
    # Metadata last (see METADATA).
    ("chmod 777 {d}/victim", "test \"$(stat -L -c %a {d}/victim 2>/dev/null || python3 -c 'import os;print(oct(os.stat(\"{d}/victim\").st_mode)[-3:])')\" = 777"),
    ("touch -d 2000-01-01 {d}/victim", "python3 -c 'import os,sys; sys.exit(os.stat(\"{d}/victim\").st_mtime > 1e9)'"),
]
# The last rows change metadata only: at cautious, runc's seccomp filter cannot see paths,
# so outside the roots they land there (a documented gap); gVisor's read-only views refuse them.
METADATA = 2
# Outside the roots at every level below dangerous; the workspace at safe only.
OUTSIDE = ["/var/tmp", "/tmp", "/dev/shm", "/home/agent"]


async def matrix(
    s: Session, confinement: Confinement, dirs: list[str], rows: list[tuple[str, str]] = MATRIX
) -> tuple[int, list[str]]:
    agent = s.confined(confinement)
    tried, found = 0, []
    for d in dirs:
        for n, (command, check) in enumerate(rows):
            await s.exec(f"echo v > {d}/victim; chown agent {d}/victim; rm -rf {d}/*-{n}", user="root")
            await agent.exec(command.format(d=d, n=n), cwd="/workspace", timeout=10)
            tried += 1
            if (await s.exec(check.format(d=d, n=n), user="root")).exit_code == 0:
                found.append(command.format(d=d, n=n))
    return tried, found


@pytest.fixture(params=["runc", "gvisor"])
async def box(rt: Runtime, request: pytest.FixtureRequest) -> AsyncIterator[Session]:
    async with rt.session(gvisor=request.param == "gvisor") as s:
        await s.exec("chmod 1777 /var/tmp; mkdir -p /workspace && chown agent: /workspace", user="root")
        yield s


async def test_level_matrix_through_the_kernel_alone(box: Session) -> None:
    agent = box.config.agent_user
    runtime = "gVisor" if box.config.gvisor else "runc"
    safe_tried, safe_found = await matrix(box, Confinement(user=agent, level="safe"), [*OUTSIDE, "/workspace"])
    cautious = Confinement(user=agent, level="cautious", write_roots=("/workspace",))
    rows = MATRIX if box.config.gvisor else MATRIX[:-METADATA]
    caut_tried, caut_found = await matrix(box, cautious, OUTSIDE, rows)
    print(f"{runtime}: level matrix at safe tried {safe_tried}, landed {len(safe_found)};"
          f" at cautious outside the roots tried {caut_tried}, landed {len(caut_found)}", safe_found + caut_found)
    assert safe_found == [] and caut_found == []
    # Control: cautious writes inside its root, and dangerous writes where the agent may.
    inside_tried, inside_found = await matrix(box, cautious, ["/workspace"])
    free_tried, free_found = await matrix(box, Confinement(user=agent, level="dangerous"), OUTSIDE)
    print(f"{runtime} control: cautious in its root landed {len(inside_found)} of {inside_tried},"
          f" dangerous landed {len(free_found)} of {free_tried}")
    assert len(inside_found) >= len(MATRIX) - 1 and len(free_found) >= free_tried - len(OUTSIDE)


async def test_no_way_out_of_a_view(rt: Runtime) -> None:
    async with rt.session(gvisor=True) as s:
        await s.exec("chmod 1777 /var/tmp; mkdir -p /workspace && chown agent: /workspace", user="root")
        # An unconfined agent process alive beside the confined command (a harness's own run).
        task = await s.spawn("exec sleep 60", user=s.config.agent_user)
        pid = task.pid
        attempts = [
            f"echo x > /proc/{pid}/root/var/tmp/out-1",
            f"echo x > /proc/{pid}/cwd/out-2",
            f"cd /proc/{pid}/root/var/tmp && touch out-3",
            "echo x > /proc/1/root/var/tmp/out-4",
            "echo x > /proc/self/root/var/tmp/out-5",
            "chroot / touch /var/tmp/out-6",
            "python3 -c \"import os; os.chroot('/run'); open('/var/tmp/out-7', 'w')\"",
            "ls /run/caisson/views && touch /run/caisson/views/1/var/tmp/out-8",
            "python3 -c \"import os; fd = os.open('/', os.O_RDONLY); os.chdir('..'); os.chdir('..'); open('var/tmp/out-9', 'w')\"",
            "mount -t tmpfs none /var/tmp && touch /var/tmp/out-10",
            "unshare -r sh -c 'touch /var/tmp/out-11'",
            "unshare -rm sh -c 'mount -t tmpfs none /mnt; touch /var/tmp/out-12'",
        ]
        count = "find /var/tmp -maxdepth 1 -name 'out-*' | wc -l; rm -f /var/tmp/out-*"
        agent = s.confined(Confinement(user=s.config.agent_user, level="safe"))
        for attack in attempts:
            await agent.exec(attack, cwd="/workspace", timeout=10)
        landed = (await s.exec(count, user="root")).stdout.strip()
        # Control: unconfined, the same commands do reach /var/tmp.
        free = s.confined(Confinement(user=s.config.agent_user, level="dangerous"))
        for attack in attempts:
            await free.exec(attack, cwd="/workspace", timeout=10)
        control = (await s.exec(count, user="root")).stdout.strip()
        await s.task_signal(task.task_id)
    print(f"gVisor, ways out of a safe view: tried {len(attempts)}, landed {landed} (unconfined: {control})")
    assert landed == "0" and int(control) >= 3
