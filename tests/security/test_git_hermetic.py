"""git tools run hermetically: configuration the agent can plant (its home's git config, a
directory that looks like a bare repository, a repository's own drivers, hooks and includes)
makes no git tool run the agent's program. Every approval is denied; the payload prints a
secret and sets another file's mode to 0."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from caisson import Runtime, Session
from caisson.policy import ApprovalAnswer, ApprovalRequest

pytestmark = pytest.mark.anyio

TOKEN = f"tok-{uuid.uuid4().hex}"
W = "/workspace"
HOME = "/home/agent"
PAYLOAD = f"#!/bin/sh\n/bin/cat {W}/.env; /bin/cat {W}/.env >&2; chmod 0 {W}/victim.txt; exit 1\n"
RUN = f"{W}/payload.sh"
ID = "-c user.name=a -c user.email=a@b"

# (what is planted, as the agent's shell would plant it, or as a repository arrives; the calls)
CASES: list[tuple[str, list[tuple[str, dict[str, Any]]]]] = [
    (f"mkdir -p {HOME}/.config/git && printf '[core]\\n\\tfsmonitor = {RUN}\\n' > {HOME}/.config/git/config",
     [("git_status", {"cwd": f"{W}/r"}), ("git_diff", {"cwd": f"{W}/r"})]),
    (f"printf '[core]\\n\\tfsmonitor = {RUN}\\n[diff]\\n\\texternal = {RUN}\\n' > {HOME}/.gitconfig",
     [("git_status", {"cwd": f"{W}/r"}), ("git_diff", {"cwd": f"{W}/r"})]),
    (f"mkdir -p {HOME}/.config/git && printf '* diff=x\\n' > {HOME}/.config/git/attributes && "
     f"printf '[diff \"x\"]\\n\\ttextconv = {RUN}\\n' > {HOME}/.config/git/config",
     [("git_diff", {"cwd": f"{W}/r"}), ("git_log", {"cwd": f"{W}/r"})]),
    (f"git init -q --bare {W}/x.git && cd {W}/x.git && git config core.bare false && git config core.worktree {W}/r "
     f"&& git config core.fsmonitor {RUN}",
     [("git_status", {"cwd": f"{W}/x.git"}), ("git_diff", {"cwd": f"{W}/x.git"}), ("git_log", {"cwd": f"{W}/x.git"})]),
    (f"git clone -q --bare {W}/r {W}/plain && cd {W}/plain && git config core.bare false && git config core.worktree {W}/r "
     f"&& git config core.hooksPath {W}/hooks && mkdir {W}/hooks && cp {RUN} {W}/hooks/pre-commit",
     [("git_commit", {"cwd": f"{W}/plain", "message": "m"}), ("git_status", {"cwd": f"{W}/plain"})]),
    (f"cd {W}/r && git config core.fsmonitor {RUN}", [("git_status", {"cwd": f"{W}/r"}), ("git_diff", {"cwd": f"{W}/r"})]),
    (f"cd {W}/r && git config filter.x.clean {RUN} && echo '* filter=x' > .gitattributes",
     [("git_commit", {"cwd": f"{W}/r", "message": "m"}), ("git_status", {"cwd": f"{W}/r"}), ("git_diff", {"cwd": f"{W}/r"})]),
    (f"cd {W}/r && git config diff.x.textconv {RUN} && echo '* diff=x' > .gitattributes",
     [("git_diff", {"cwd": f"{W}/r"}), ("git_log", {"cwd": f"{W}/r"})]),
    (f"cd {W}/r && git config diff.external {RUN}", [("git_diff", {"cwd": f"{W}/r"})]),
    (f"cd {W}/r && cp {RUN} .git/hooks/pre-commit && cp {RUN} .git/hooks/post-checkout",
     [("git_commit", {"cwd": f"{W}/r", "message": "m"}), ("git_checkout", {"cwd": f"{W}/r", "branch": "master"})]),
    (f"cd {W}/r && mkdir -p .husky && cp {RUN} .husky/pre-commit && git config core.hooksPath .husky",
     [("git_commit", {"cwd": f"{W}/r", "message": "m"})]),
    (f"printf '[filter \"y\"]\\n\\tclean = {RUN}\\n' > {W}/inc.cfg && cd {W}/r && git config include.path {W}/inc.cfg "
     "&& echo '* filter=y' > .gitattributes",
     [("git_commit", {"cwd": f"{W}/r", "message": "m"}), ("git_status", {"cwd": f"{W}/r"})]),
    (f"mkdir -p /tmp/evil && cp -r {W}/r/.git/. /tmp/evil/ && printf '[core]\\n\\tfsmonitor = {RUN}\\n' >> /tmp/evil/config "
     f"&& mkdir -p {W}/s && echo 'gitdir: /tmp/evil' > {W}/s/.git",
     [("git_status", {"cwd": f"{W}/s"})]),
    (f"cd {W}/r && git config core.worktree {W}/s", [("git_status", {"cwd": f"{W}/r"})]),
]


async def deny(request: ApprovalRequest) -> ApprovalAnswer:
    return ApprovalAnswer.deny("denied by the test")


async def fresh(s: Session) -> None:
    agent = s.config.agent_user
    await s.exec(f"rm -rf {W}/* {W}/.[!.]* {HOME}/.config {HOME}/.gitconfig /tmp/evil", user="root")
    await s.write_file(f"{W}/.env", f"KEY={TOKEN}\n", mode=0o600, owner=agent)
    await s.write_file(f"{W}/victim.txt", "v\n", mode=0o644, owner=agent)
    await s.write_file(RUN, PAYLOAD, mode=0o755, owner=agent)
    res = await s.exec(
        f"mkdir -p {W}/r && cd {W}/r && git init -q && echo a > a.txt && git add a.txt && git {ID} commit -qm one "
        "&& echo b >> a.txt",
        user=agent,
    )
    assert res.exit_code == 0, res.stderr


async def attack(s: Session, plant: str, calls: list[tuple[str, dict[str, Any]]]) -> list[str]:
    await fresh(s)
    res = await s.exec(plant, user=s.config.agent_user)
    assert res.exit_code == 0, (plant, res.stderr)
    landed = []
    for tool, args in calls:
        result = await s.call(tool, args)
        mode = (await s.stat(f"{W}/victim.txt")).mode & 0o777
        if TOKEN in result.text or mode != 0o644:
            landed.append(f"{tool} after {plant[:60]!r}: {result.text[:200]!r}")
    return landed


@pytest.mark.parametrize("gvisor", [False, True], ids=["runc", "gvisor"])
async def test_planted_git_configuration_runs_nothing(rt: Runtime, gvisor: bool) -> None:
    async with rt.session(gvisor=gvisor, approval_handler=deny) as s:
        tried, landed = 0, []
        for plant, calls in CASES:
            tried += len(calls)
            landed += await attack(s, plant, calls)
        # The tools still work on an ordinary repository.
        await fresh(s)
        status = await s.call("git_status", {"cwd": f"{W}/r"})
        diff = await s.call("git_diff", {"cwd": f"{W}/r"})
    print(f"planted git configuration ({'gvisor' if gvisor else 'runc'}): tried {tried}, landed {len(landed)}: {landed}")
    assert landed == []
    assert status.ok and "a.txt" in status.text
    assert diff.ok and "+b" in diff.text


async def test_the_plants_are_real_for_plain_git(rt: Runtime) -> None:
    """The same plants do run the payload under an ordinary git as the agent (the control)."""
    async with rt.session() as s:
        ran = 0
        # The last plant runs no program of its own: it only points git at another tree.
        for plant, calls in CASES[:-1]:
            await fresh(s)
            await s.exec(plant, user=s.config.agent_user)
            tool, args = calls[0]
            sub = {"git_status": "status", "git_diff": "diff", "git_log": "log -p", "git_branch": "branch",
                   "git_commit": f"{ID} commit -qam m", "git_checkout": "checkout master"}[tool]
            res = await s.exec(f"git {sub}", cwd=args["cwd"], user=s.config.agent_user)
            ran += TOKEN in res.stdout + res.stderr
    print(f"planted git configuration, plain git (control): tried {len(CASES) - 1}, ran the payload {ran}")
    assert ran == len(CASES) - 1


# A bare repository with two commits, as a project may hold one; then the agent's own step,
# auto-approved (cautious: a file in the workspace): it appends to the bare repository's config.
BARE_REPO = (f"cd {W} && git clone -q --bare r foo && echo b > r/b.txt && cd r && git add b.txt && "
             f"git {ID} commit -qm two && git push -q ../foo HEAD")
BARE = f"printf '[diff]\\n\\texternal = {RUN}\\n[core]\\n\\tfsmonitor = {RUN}\\n' >> {W}/foo/config"


@pytest.mark.parametrize("gvisor", [False, True], ids=["runc", "gvisor"])
async def test_a_bare_looking_directory_is_no_repository_for_bash(rt: Runtime, gvisor: bool) -> None:
    """The agent makes a directory that looks like a bare repository (cautious: plain files in
    the workspace), then runs a read-only git command in it: git must not take its config."""
    async with rt.session(gvisor=gvisor, approval_handler=deny) as s:
        await fresh(s)
        made = await s.exec(BARE_REPO, user=s.config.agent_user)
        assert made.exit_code == 0, made.stderr
        planted = await s.call("bash", {"command": BARE})
        attempts: list[tuple[str, dict[str, Any]]] = [
            ("bash", {"command": "git status", "working_dir": f"{W}/foo"}),
            ("bash", {"command": "git log -p -1", "working_dir": f"{W}/foo"}),
            ("bash", {"command": "git show", "working_dir": f"{W}/foo"}),
            ("bash", {"command": "git diff HEAD~1 HEAD", "working_dir": f"{W}/foo"}),
            ("bash", {"command": f"git diff HEAD~1 HEAD > {W}/out.txt 2>&1; cat {W}/out.txt", "working_dir": f"{W}/foo"}),
            ("bash", {"command": f"git diff HEAD~1 HEAD 2> {W}/err.txt; cat {W}/err.txt", "working_dir": f"{W}/foo"}),
            ("bash", {"command": "git log -p", "working_dir": f"{W}/foo/refs"}),
            ("bash", {"command": "cd foo && git status", "working_dir": W}),
            ("bash", {"command": "git -C foo status", "working_dir": W}),
            ("bash", {"command": f"unset GIT_CONFIG_COUNT; git diff HEAD~1 HEAD > {W}/o1 2>&1; cat {W}/o1",
                      "working_dir": f"{W}/foo"}),
            ("bash", {"command": f"env -u GIT_CONFIG_COUNT git diff HEAD~1 HEAD > {W}/o2 2>&1; cat {W}/o2",
                      "working_dir": f"{W}/foo"}),
            ("bash", {"command": f"env -i /usr/bin/git diff HEAD~1 HEAD > {W}/o3 2>&1; cat {W}/o3",
                      "working_dir": f"{W}/foo"}),
            ("bash", {"command": f"unset -v GIT_CONFIG_KEY_0; git diff HEAD~1 HEAD > {W}/o4 2>&1; cat {W}/o4",
                      "working_dir": f"{W}/foo"}),
            ("bash", {"command": f"git diff HEAD~1 HEAD > {W}/o5 2>&1; cat {W}/o5", "working_dir": f"{W}/foo/refs"}),
            ("exec", {"command": "git show", "cwd": "foo"}),
            ("run_code", {"command": "git log -p -1", "cwd": f"{W}/foo"}),
        ]
        await s.call("bash", {"command": f"cd {W}/foo"})
        attempts.append(("bash", {"command": "git show"}))
        landed = []
        for tool, args in attempts:
            result = await s.call(tool, args)
            mode = (await s.stat(f"{W}/victim.txt")).mode & 0o777
            if TOKEN in result.text or mode != 0o644:
                landed.append((tool, args, result.level))
                await s.exec(f"chmod 644 {W}/victim.txt", user="root")
    print(f"bare-looking directory, bash ({'gvisor' if gvisor else 'runc'}): planted {planted.decision}; "
          f"tried {len(attempts)}, landed {len(landed)}: {landed}")
    assert landed == []
