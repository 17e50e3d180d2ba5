"""The home's dot entries and ~/bin, guarded by the kernel (README, Known limits: files that run later).

Landlock grants rights on whole hierarchies, so while the home was a write root nothing in
the kernel kept a cautious command from its dot entries: the policy alone did. Now the home
is not a write root, and each of its existing entries that is not a dot entry, ``bin``, a
link or a file with a second name is one. The first tests run that ruleset by hand as the
agent on the session's kernel (what the decision rests on, and that granting the home the
right to make entries plus REFER would let a file be renamed into a dot entry); the others
attack the ruleset the daemon builds, by the kernel alone and through the whole policy with
every approval denied, on runc and gVisor.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

import pytest

from caisson import Runtime, Session
from caisson.policy import ApprovalAnswer, ApprovalRequest, Level

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


# What a cautious command can do to the home, built now: the home's dot entries and ~/bin by
# every means a shell offers; the kernel alone (the dispatcher's cautious confinement), then
# through the whole policy with every approval denied.
HOME = "/home/agent"
SETUP = f"""
set -e
cd {HOME}
mkdir -p proj/sub bin .config/git
echo payload > proj/payload; echo tool > bin/tool; echo n > notes.txt; touch .bashrc .profile .config/git/config
ln -sfn {HOME}/.bashrc proj/dotlink; ln -sfn {HOME}/.config link-to-config; ln -f .profile hard
git init -q proj/repo && git -C proj/repo -c user.name=a -c user.email=a@b commit -q --allow-empty -m init
"""
ATTACKS = [
    "echo x >> ~/.bashrc", "echo x > ~/.gdbinit", "mkdir ~/.ipython", "printf x | tee -a ~/.bashrc",
    "cp ~/proj/payload ~/.pdbrc", "mv ~/proj/payload ~/.pdbrc", "ln -s ~/proj/payload ~/.vimrc",
    "ln ~/proj/payload ~/.vimrc", "install -m 755 ~/proj/payload ~/bin/ls", "echo x > ~/bin/tool",
    "python3 -c \"import os; open(os.path.expanduser('~') + '/.pro' + 'file', 'a').write('x')\"",
    "python3 -c \"import os; os.rename(os.path.expanduser('~/notes.txt'), os.path.expanduser('~/.pdbrc'))\"",
    "git clone -q ~/proj/repo ~/.x", "git clone -q ~/proj/repo ~/bin/x", "echo x > ~/proj/dotlink",
    "echo x > ~/link-to-config/git/config", "echo x >> ~/hard", "mv ~/proj ~/.proj", "mv ~/bin ~/bin2",
    "mkdir ~/newdir && mv ~/newdir ~/.newdir", "touch ~/new && mv ~/new ~/.new", "cd ~/proj && mv payload ../.pdbrc",
    "echo x > ~/.config/git/config", "rm -f ~/.bashrc", "sed -i s/^/x/ ~/.profile", "truncate -s 0 ~/.profile",
    "dd if=~/proj/payload of=~/.bash_login status=none", "cp -r ~/proj/sub ~/.ssh", "ln -sf ~/proj/payload ~/.bashrc",
    "cd ~ && tar cf /tmp/t.tar -C ~/proj payload && tar xf /tmp/t.tar --transform s/payload/.pdbrc/",
    "python3 -c \"import os, shutil; shutil.copytree(os.path.expanduser('~/proj/sub'), os.path.expanduser('~/bin/sub'))\"",
    # A second name inside a writable entry would be written by its path there.
    "ln ~/.bashrc ~/proj/b; echo x >> ~/proj/b", "ln ~/bin/tool ~/proj/t; echo x >> ~/proj/t",
    "cp -al ~/.config ~/proj/cfg; echo x > ~/proj/cfg/git/config",
]
# Work in the home's existing entries (by absolute path: the classifier does not expand "~").
ORDINARY = [
    f"echo more >> {HOME}/proj/payload", f"mkdir -p {HOME}/proj/new/deep && echo y > {HOME}/proj/new/deep/f",
    f"mv {HOME}/proj/sub {HOME}/proj/sub2", f"sed -i s/more/less/ {HOME}/proj/payload",
    f"cp {HOME}/proj/payload {HOME}/proj/copy",
]
GIT_WORK = f"cd {HOME}/proj/repo && echo a > a && git add a && git -c user.name=a -c user.email=a@b commit -qm a"
# Everything of the home but what ordinary work changes: names, kinds, links, contents.
STATE = r"""
import hashlib, os
home = os.path.expanduser("~agent")
for top, dirs, files in os.walk(home):
    if top == home:
        dirs[:] = [d for d in dirs if d != "proj"]
    for name in sorted(dirs + files):
        p = os.path.join(top, name)
        st = os.lstat(p)
        body = open(p, "rb").read() if os.path.isfile(p) and not os.path.islink(p) else b""
        print(p, oct(st.st_mode), st.st_ino, os.readlink(p) if os.path.islink(p) else "", hashlib.sha256(body).hexdigest())
"""


async def attack_home(s: Session, run: Callable[[str], Awaitable[object]]) -> list[str]:
    """The attacks run by ``run``: those that changed something of the home outside ~/proj."""
    made = await s.exec(SETUP, user=s.config.agent_user)
    assert made.exit_code == 0, made.stderr
    landed = []
    for command in ATTACKS:
        before = (await s.exec(["python3", "-c", STATE], user="root")).stdout
        await run(command)
        if (await s.exec(["python3", "-c", STATE], user="root")).stdout != before:
            landed.append(command)
    return landed


@pytest.mark.parametrize("gvisor", [False, True], ids=["runc", "gvisor"])
async def test_cautious_commands_cannot_plant_dot_entries_of_the_home(rt: Runtime, gvisor: bool) -> None:
    async with rt.session(gvisor=gvisor) as s:
        agent = s.confined(s._dispatcher.confinement(Level.CAUTIOUS))
        landed = await attack_home(s, lambda command: agent.exec(command, cwd="/workspace", timeout=30))
        ordinary = [(c, await agent.exec(c, cwd="/workspace", timeout=30)) for c in [*ORDINARY, GIT_WORK, "echo z >> ~/notes.txt"]]
        failed = [(c, r.stderr) for c, r in ordinary if r.exit_code != 0]
        new_entry = await agent.exec("echo x > ~/todo.txt", cwd="/workspace")
    where = "gvisor" if gvisor else "runc"
    print(f"home's dot entries and ~/bin, kernel alone at cautious ({where}): tried {len(ATTACKS)}, "
          f"landed {len(landed)}: {landed}")
    assert landed == []
    assert failed == []  # work in the home's existing entries goes on
    # The price: a new top-level entry of the home is refused too.
    assert new_entry.exit_code != 0 and ("Permission denied" in new_entry.stderr or "Read-only" in new_entry.stderr)


ASKED: list[ApprovalRequest] = []


async def deny(request: ApprovalRequest) -> ApprovalAnswer:
    ASKED.append(request)
    return ApprovalAnswer.deny("denied by the test")


@pytest.mark.parametrize("gvisor", [False, True], ids=["runc", "gvisor"])
async def test_bash_calls_cannot_plant_dot_entries_of_the_home(rt: Runtime, gvisor: bool) -> None:
    async with rt.session(gvisor=gvisor, approval_handler=deny) as s:
        landed = await attack_home(s, lambda command: s.call("bash", {"command": command}))
        ordinary = [await s.call("bash", {"command": c}) for c in ORDINARY]
        ASKED.clear()
        new_entries = [await s.call("bash", {"command": f"echo x > {HOME}/todo.txt"}),
                       await s.call("bash", {"command": f"cp {HOME}/proj/payload {HOME}/"}),
                       await s.call("write_file", {"path": f"{HOME}/todo.txt", "content": "x"})]
        left = (await s.exec(f"ls {HOME}", user="root")).stdout.split()
    where = "gvisor" if gvisor else "runc"
    print(f"home's dot entries and ~/bin, bash with every approval denied ({where}): tried {len(ATTACKS)}, "
          f"landed {len(landed)}: {landed}")
    assert landed == []
    assert [r.text for r in ordinary if not r.ok] == []
    assert [r.level.value if r.level else None for r in ordinary] == ["cautious"] * len(ORDINARY)
    # A new top-level entry of the home needs approval, and says why.
    assert [r.ok for r in new_entries] == [False] * 3 and "todo.txt" not in left and "payload" not in left
    assert [r.level.value if r.level else None for r in new_entries] == ["dangerous"] * 3
    assert "the home or an entry at its top" in " ".join(ASKED[0].reasons), ASKED[0].reasons


@pytest.mark.parametrize("gvisor", [False, True], ids=["runc", "gvisor"])
async def test_an_entry_swapped_for_a_link_while_roots_are_listed_grants_nothing(rt: Runtime, gvisor: bool) -> None:
    """Another writer (an approved command: a cautious one cannot rename at the home's top
    level) swaps ~/proj for a link to ~/.config again and again while cautious commands write
    through ~/proj: no ruleset or view may make the link's target a root."""
    async with rt.session(gvisor=gvisor) as s:
        agent_user = s.config.agent_user
        made = await s.exec(f"mkdir -p {HOME}/proj/git {HOME}/.config/git && : > {HOME}/.config/git/config", user=agent_user)
        assert made.exit_code == 0, made.stderr
        swap = (f"import os\nos.chdir({HOME!r})\nwhile True:\n    os.rename('proj', 'proj.real')\n"
                f"    os.symlink({HOME!r} + '/.config', 'proj')\n    os.unlink('proj')\n    os.rename('proj.real', 'proj')\n")
        swapper = await s.spawn(["python3", "-c", swap], user=agent_user, timeout=300)
        agent = s.confined(s._dispatcher.confinement(Level.CAUTIOUS))
        tried, refused = 150, 0
        for _ in range(tried):
            r = await agent.exec("echo x >> ~/proj/git/config", cwd="/workspace", timeout=30)
            refused += "Permission denied" in r.stderr or "Read-only" in r.stderr  # the write met the link
        await s.task_signal(swapper.task_id)
        planted = (await s.exec(f"wc -c < {HOME}/.config/git/config", user="root")).stdout.strip()
    where = "gvisor" if gvisor else "runc"
    print(f"~/proj swapped for a link to ~/.config during cautious writes ({where}): tried {tried} "
          f"({refused} refused through the link), landed {planted}")
    assert planted == "0"
