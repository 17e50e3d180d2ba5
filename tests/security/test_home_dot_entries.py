"""What the kernel can do for the home's dot entries (README, Known limits: files that run later).

Landlock grants rights on whole hierarchies, so while the home is a write root nothing in
the kernel keeps a cautious command from its dot entries: the policy alone does. The way
the kernel could: the home is not a write root, and each of its existing children that is
not a dot entry is one (a directory with every right, a file with the file rights). This
test runs that ruleset as the agent in a real runc session, on the session's kernel, and
pins what the decision in the README rests on: dot entries refused, the children written,
new top-level entries refused; and that granting the home the right to make entries plus
REFER would let a file written below be renamed into a dot entry.
"""

from __future__ import annotations

import json

import pytest

from caisson import Session

pytestmark = pytest.mark.anyio

PROBE = r'''
import ctypes, errno, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
class Attr(ctypes.Structure): _fields_ = [("fs", ctypes.c_uint64)]
class Beneath(ctypes.Structure): _pack_ = 1; _fields_ = [("allowed", ctypes.c_uint64), ("fd", ctypes.c_int32)]
ALL, READ = (1 << 15) - 1, 1 | 4 | 8            # ABI 3's rights; execute, read file, read dir
WRITE_FILE, TRUNCATE, MAKE = 2, 1 << 14, 128 | 256   # make dir, make reg
REFER = 1 << 13
home = sys.argv[1]
home_rights = {"none": 0, "make+refer": MAKE | REFER}[sys.argv[2]]
rs = libc.syscall(444, ctypes.byref(Attr(ALL)), ctypes.sizeof(Attr), 0)
def rule(path, rights):
    fd = os.open(path, os.O_PATH)
    assert libc.syscall(445, rs, 1, ctypes.byref(Beneath(rights, fd)), 0) == 0, ctypes.get_errno()
rule("/", READ)
rule(home + "/proj", ALL)
rule(home + "/notes.txt", WRITE_FILE | TRUNCATE | 4)
if home_rights:
    rule(home, home_rights | READ)
libc.prctl(38, 1, 0, 0, 0)
assert libc.syscall(446, rs, 0) == 0, ctypes.get_errno()
def attempt(f):
    try:
        f()
        return "done"
    except OSError as e:
        return errno.errorcode[e.errno]
print(json.dumps({
    "append ~/.bashrc": attempt(lambda: open(home + "/.bashrc", "a").write("x")),
    "create ~/.gdbinit": attempt(lambda: open(home + "/.gdbinit", "w").write("x")),
    "mkdir ~/.ipython": attempt(lambda: os.mkdir(home + "/.ipython")),
    "rename ~/proj/x to ~/.pdbrc": attempt(lambda: os.rename(home + "/proj/x", home + "/.pdbrc")),
    "write ~/proj/y": attempt(lambda: open(home + "/proj/y", "w").write("x")),
    "append ~/notes.txt": attempt(lambda: open(home + "/notes.txt", "a").write("x")),
    "create ~/new.txt": attempt(lambda: open(home + "/new.txt", "w").write("x")),
}))
'''


async def probe(s: Session, variant: str) -> dict[str, str]:
    agent = s.config.agent_user
    home = f"/tmp/home-{variant}"
    await s.exec(f"rm -rf {home} && mkdir -p {home}/proj && echo orig > {home}/.bashrc && echo evil > {home}/proj/x "
                 f"&& echo n > {home}/notes.txt", user=agent)
    await s.write_file(f"/tmp/probe-{variant}.py", PROBE, owner=agent)
    result = await s.exec(["python3", f"/tmp/probe-{variant}.py", home, variant], user=agent)
    assert result.exit_code == 0, result.stderr
    outcome: dict[str, str] = json.loads(result.stdout)
    print(f"home's children as write roots ({variant}): {outcome}")
    return outcome


async def test_kernel_keeps_dot_entries_when_only_the_homes_children_are_roots(session: Session) -> None:
    outcome = await probe(session, "none")
    refused = ["append ~/.bashrc", "create ~/.gdbinit", "mkdir ~/.ipython", "rename ~/proj/x to ~/.pdbrc"]
    landed = [k for k in refused if outcome[k] == "done"]
    print(f"dot entries of a home that is not a write root: tried {len(refused)}, landed {len(landed)}")
    assert landed == []
    # The price: work goes on in existing children, but a new top-level entry is refused too.
    assert (outcome["write ~/proj/y"], outcome["append ~/notes.txt"], outcome["create ~/new.txt"]) == (
        "done", "done", "EACCES")


async def test_refer_on_the_home_would_let_a_dot_entry_be_planted(session: Session) -> None:
    outcome = await probe(session, "make+refer")
    assert outcome["rename ~/proj/x to ~/.pdbrc"] == "done"
    assert outcome["append ~/.bashrc"] == "EACCES"
