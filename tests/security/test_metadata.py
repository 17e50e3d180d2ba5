"""Metadata at level safe: no command changes a file's mode, owner, times or extended
attributes, on runc (Landlock has no right for them) and on gVisor (no Landlock at all).

Each attack runs as the agent under a safe confinement, straight through the session's
confined client (the kernel alone stands: no classifier in the way), on files the agent
owns; root then compares every target's full stat and extended attributes with what they
were. Programs: coreutils, python3 (path and descriptor forms, a descriptor opened for
reading, the x32 ABI's numbers through ``syscall``), perl, setfacl and setfattr where the
image has them. A control runs the same at dangerous and shows they do land.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from caisson import Runtime, Session
from caisson.client.models import Confinement

pytestmark = pytest.mark.anyio

TARGETS = ("/home/agent", "/workspace/f", "/workspace/g", "/workspace/d", "/workspace")
PY = "python3 -c 'import os, ctypes; {}'"
ATTACKS = [
    "chmod 777 ~",
    "chmod 0 /workspace/f",
    "chmod u+s,g+s /workspace/g",
    "chmod -R 777 /workspace/d",
    "touch -d 2000-01-01 /workspace/f",
    "touch -m -t 200001010000 /workspace/g",
    "touch -a /workspace/f",
    "chown agent:agent /workspace/f",
    "chgrp agent /workspace/g",
    "chmod 700 /workspace",
    "command -v setfacl >/dev/null && setfacl -m u:root:rwx /workspace/f",
    "command -v setfattr >/dev/null && setfattr -n user.pwn -v 1 /workspace/f",
    PY.format("os.chmod(\"/workspace/f\", 0o777)"),
    PY.format("os.chmod(\"/workspace/f\", 0o777, follow_symlinks=False)"),
    PY.format("os.fchmod(os.open(\"/workspace/f\", os.O_RDONLY), 0o777)"),
    PY.format("os.fchmod(os.open(\"/workspace/d\", os.O_RDONLY), 0o777)"),
    PY.format("os.utime(\"/workspace/f\", (1, 1))"),
    PY.format("os.utime(os.open(\"/workspace/g\", os.O_RDONLY), (1, 1))"),
    PY.format("os.chown(\"/workspace/f\", os.getuid(), os.getgid())"),
    PY.format("os.fchown(os.open(\"/workspace/g\", os.O_RDONLY), os.getuid(), os.getgid())"),
    PY.format("os.lchown(\"/workspace/f\", -1, os.getgid())"),
    PY.format("os.setxattr(\"/workspace/f\", \"user.pwn\", b\"1\")"),
    PY.format("os.setxattr(os.open(\"/workspace/g\", os.O_RDONLY), \"user.pwn\", b\"1\")"),
    # x32 numbers on x86_64 (0x40000000 | nr): chmod 90, fchmodat 268, utimensat 280.
    PY.format("libc = ctypes.CDLL(None, use_errno=True); libc.syscall(0x40000000 | 90, b\"/workspace/f\", 0o777)"),
    PY.format("libc = ctypes.CDLL(None, use_errno=True); libc.syscall(0x40000000 | 268, -100, b\"/workspace/g\", 0o777, 0)"),
    PY.format("libc = ctypes.CDLL(None, use_errno=True); libc.syscall(0x40000000 | 280, -100, b\"/workspace/f\", None, 0)"),
    "perl -e 'chmod 0777, \"/workspace/f\"'",
    "perl -e 'utime 1, 1, \"/workspace/g\"'",
    "perl -e 'chown $<, $(, \"/workspace/f\"'",
    "perl -e 'opendir(my $d, \"/workspace/d\"); chmod 0777, $d'",
    "find /workspace -maxdepth 1 -name f -exec chmod 777 {} +",
    "bash -c 'chmod 777 /workspace/g' & wait",
    "(sleep 0.2; chmod 777 /workspace/f) & disown; sleep 0.4",
    "cd /workspace && env -i /bin/chmod 777 f",
]
# Mode, owner, times (ns) and extended attributes of every target (Python: gVisor's statx
# refuses coreutils' stat here). A directory's access time is left out: gVisor moves it on
# every listing (no relatime), and no attack reads a target file.
STATE = (
    "python3 -c 'import os, stat, sys\n"
    "for p in sys.argv[1:]:\n"
    "    st = os.lstat(p)\n"
    "    atime = None if stat.S_ISDIR(st.st_mode) else st.st_atime_ns\n"
    "    print(p, oct(st.st_mode), st.st_uid, st.st_gid, atime, st.st_mtime_ns, st.st_ctime_ns,"
    " sorted(os.listxattr(p)))' " + " ".join(TARGETS)
)


@pytest.fixture(params=["runc", "gvisor"])
async def box(rt: Runtime, request: pytest.FixtureRequest) -> AsyncIterator[Session]:
    async with rt.session(gvisor=request.param == "gvisor") as s:
        yield s


async def reset(s: Session) -> str:
    """Fresh targets and their state. Access times lie ahead, where a mere read leaves them
    (relatime), so only a deliberate change moves them."""
    r = await s.exec(
        "set -e; cd /workspace; rm -rf f g d; echo x > f; echo y > g; mkdir -p d/e; touch d/e/h; "
        "chown -R agent:agent /workspace /home/agent; chmod 755 /home/agent /workspace; "
        "touch -d 2020-02-02 f g d; touch -a -d 2099-01-01 " + " ".join(TARGETS) + "; " + STATE,
        user="root",
    )
    assert r.exit_code == 0, r.stderr
    return r.stdout


async def landed(s: Session, confinement: Confinement) -> list[str]:
    """The attacks that changed any target's metadata, each from a fresh start."""
    agent = s.confined(confinement)
    found = []
    for attack in ATTACKS:
        before = await reset(s)
        await agent.exec(attack, cwd="/workspace", timeout=10)
        after = (await s.exec(STATE, user="root")).stdout
        if after != before:
            found.append(attack)
    return found


async def test_safe_changes_no_metadata(box: Session) -> None:
    agent = box.config.agent_user
    safe = Confinement(user=agent, level="safe")
    # The bash tool keeps its state writable even for a safe call: still no metadata.
    kept = safe.writable("/tmp/.caisson")
    found = await landed(box, safe) + await landed(box, kept)
    runtime = "gVisor" if box.config.gvisor else "runc"
    print(f"metadata at safe on {runtime}: tried {2 * len(ATTACKS)}, landed {len(found)}", found)
    assert found == []
    # Reading and running stay as they were.
    r = await box.confined(safe).exec(PY.format('print(oct(os.stat("/workspace/f").st_mode))') + " && cat /workspace/f")
    assert (r.exit_code, r.stdout) == (0, "0o100644\nx\n")


async def test_control_metadata_lands_when_allowed(box: Session) -> None:
    agent = box.config.agent_user
    dangerous = await landed(box, Confinement(user=agent, level="dangerous"))
    cautious = await landed(
        box, Confinement(user=agent, level="cautious", write_roots=("/workspace", f"/home/{agent}"))
    )
    runtime = "gVisor" if box.config.gvisor else "runc"
    print(f"control on {runtime}: landed {len(dangerous)} of {len(ATTACKS)} at dangerous, {len(cautious)} at cautious")
    # Most land; setfacl/setfattr may be missing and x32 calls fail for their own reasons.
    assert len(dangerous) >= len(ATTACKS) - 8 and len(cautious) >= len(ATTACKS) - 8
