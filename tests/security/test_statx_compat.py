"""gVisor here refuses statx's AT_NO_AUTOMOUNT, which coreutils' ls and stat always pass: the
daemon preloads statx-compat (sandbox/statx_compat.py) there, so ``ls DIR`` works as on runc.

The preload is root's: an agent at dangerous tries to change what every program loads (the
preload list, the library, an LD_PRELOAD of its own cannot reach other programs) and lands
nothing. On runc nothing is preloaded."""

from __future__ import annotations

import pytest

from caisson import Runtime
from caisson._sandbox.statx_compat import IN_MEMORY, PRELOAD
from caisson.docker.images import DAEMON_PARENT
from caisson.docker.native import STATX_COMPAT
from caisson.policy import Policy

pytestmark = pytest.mark.anyio

APPROVE = Policy(auto_approve_all=True)
LIBRARY = f"{DAEMON_PARENT}/sandbox/{STATX_COMPAT.name}"


async def test_ls_and_stat_of_a_path_work_on_gvisor(rt: Runtime) -> None:
    async with rt.session(gvisor=True, policy=APPROVE) as s:
        await s.exec("mkdir -p /workspace/src/sub && echo x > /workspace/src/a.txt")
        for command, expected in (("ls src", "a.txt\nsub\n"), ("stat -c %n src/a.txt", "src/a.txt\n"),
                                  ("ls -d /etc /proc", "/etc\n/proc\n")):
            r = await s.call("bash", {"command": command})
            assert r.ok and r.data["stdout"] == expected, (command, r.text)


async def test_the_agent_cannot_change_what_every_program_preloads(rt: Runtime) -> None:
    attacks = [f"echo /tmp/evil.so >> {PRELOAD}", f"rm -f {PRELOAD}", f"chmod 666 {PRELOAD}",
               f"python3 -c \"open('{PRELOAD}', 'w').write('/tmp/evil.so')\""]
    for library in (LIBRARY, IN_MEMORY):  # the image's copy, and the one the list names
        attacks += [f"cp /bin/true {library}", f"mv {library} /tmp/x", f"ln -sf /tmp/evil.so {library}",
                    f"truncate -s 0 {library}", f"chmod 666 {library}"]
    attacks += [f"ln -s /tmp/evil.so {IN_MEMORY}.new", f"echo x > {IN_MEMORY}.new"]
    files = f"{PRELOAD} {LIBRARY} {IN_MEMORY}"
    async with rt.session(gvisor=True, policy=APPROVE) as s:
        before = await s.exec(f"sha256sum {files}; cat {PRELOAD}; ls /dev | grep statx", user="root")
        assert before.exit_code == 0, before.stderr
        assert f"\n{IN_MEMORY}\n" in before.stdout, before.stdout  # the list names the copy in memory
        landed = 0
        for attack in attacks:
            await s.call("bash", {"command": attack})
            after = await s.exec(f"sha256sum {files}; cat {PRELOAD}; ls /dev | grep statx", user="root")
            if after.stdout != before.stdout:
                landed += 1
                await s.exec(f"printf '%s\\n' {IN_MEMORY} > {PRELOAD}; cp {LIBRARY} {IN_MEMORY}", user="root")
        print(f"preload attacks as the agent at dangerous: tried {len(attacks)}, landed {landed}")
        assert landed == 0


async def test_runc_preloads_nothing(rt: Runtime) -> None:
    """Not even in a session made from a gVisor session's snapshot, which carries the list."""
    async with rt.session(gvisor=True) as g:
        ref = await g.snapshot()
    for made in ({}, {"from_snapshot": ref}):
        async with rt.session(**made) as s:
            r = await s.exec(f"test -e {PRELOAD} && cat {PRELOAD}; ls /workspace >/dev/null && echo ok")
            assert (r.stdout, r.stderr) == ("ok\n", ""), (made, r)
