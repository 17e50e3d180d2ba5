"""A tenant's changes to a session's files through ``caisson serve`` follow the session's policy,
as the agent's tool calls do: write, copy-in, mkdir, remove and rename may not plant what
programs run or read at start (the home's dot entries and ``~/bin``, a repository's hooks and
config, Python's site hooks) nor touch a secret, by any name (links, tar members, ``..``,
doubled slashes, renames of files and directories); and a session's ``env`` given at open may
not change what its commands run. Every approval is denied. What landed is counted three ways:
a start-up file or hook changed (as root, after the attacks), a planted file that ran in the
agent's later commands, and the secret shown by them."""

from __future__ import annotations

import contextlib
import io
import json
import os
import posixpath
import tarfile
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import docker
import httpx
import pytest

from caisson import RemoteRuntime, RemoteSession, Runtime
from caisson.errors import CaissonError
from caisson.server.copy_in import KEEP_OLD, _Old, _restore
from tests.server.conftest import start_server
from tests.server.harness import Api, approving

pytestmark = pytest.mark.anyio

TOKEN = f"tok-{uuid.uuid4().hex}"
W = "/workspace"
H = "/home/agent"
REPO = f"{W}/repo"
PLANT = " && ".join([
    f"printf 'KEY={TOKEN}\\n' > {W}/.env && chmod 600 {W}/.env",
    f"git init -q {REPO} && mkdir -p {W}/newrepo {H}/proj",
    f"chown -R agent:agent {W} {H}/proj",
    # Names an agent could make before the tenant writes: links into the home and the
    # repository, a dangling one, and a second name of ~/.bashrc.
    f"su agent -c 'ln -s {H} {W}/to-home && ln -s {REPO}/.git {W}/to-git && ln -s {H}/.bashrc {W}/to-bashrc"
    f" && ln -s {H}/.bash_login {W}/dangling && ln -s {REPO}/.git/hooks {W}/to-hooks && ln {H}/.bashrc {W}/second'",
])
# What programs run or read at start, and secrets: none may change.
TARGETS = [
    f"{H}/.bashrc", f"{H}/.profile", f"{H}/.bash_profile", f"{H}/.bash_login", f"{H}/.gitconfig",
    f"{H}/.config/git/config", f"{H}/.ssh/config", f"{H}/.ssh/authorized_keys", f"{H}/.pythonrc", f"{H}/.inputrc",
    f"{H}/bin/ls", f"{H}/.local/bin/git", f"{H}/.local/lib/python3.11/site-packages/evil.pth",
    f"{H}/.local/lib/python3.11/site-packages/usercustomize.py", f"{REPO}/.git/hooks/pre-commit",
    f"{REPO}/.git/hooks/post-checkout", f"{REPO}/.git/config", f"{W}/newrepo/.git/hooks/pre-commit",
    f"{W}/.githooks/pre-commit", f"{W}/evil.pth", f"{W}/sitecustomize.py", "/tmp/sitecustomize.py", f"{W}/.env",
]
# Where a changed or new file counts as landed (listed by root, with their hashes).
WATCHED = f"{H} {REPO}/.git {REPO}/.husky {W}/newrepo {W}/.githooks {W}/.env {W}/evil.pth {W}/sitecustomize.py /tmp/sitecustomize.py"
LISTING = (
    f"{{ find {WATCHED} -path {H}/proj -prune -o -type l -printf '%l  %p\\n' 2>/dev/null; find {WATCHED} -path {H}/proj"
    " -prune -o -type f -print0 2>/dev/null | xargs -0 -r sha256sum; } | sort"
)
# The agent's later commands that would run what was planted.
TRIGGERS = [
    "echo ok", f"git -C {REPO} status", "bash -l -c 'echo ok'", "bash -i -c 'echo ok'",
    "python3 -c 'print(1)'", "ls",
]


def payload(i: int) -> bytes:
    return f"#!/bin/sh\necho PLANTED-{i}-$(cat {W}/.env)\nimport os; print('PLANTED-{i}')\n".encode()


def dressings(path: str) -> list[str]:
    """The names of ``path`` a tenant may try: as is, doubled slashes, ``.`` and ``..``,
    relative to the workdir, through a link the agent made, case and look-alike variants."""
    head, name = posixpath.split(path)
    names = [path, path.replace("/", "//"), f"{head}/./nowhere/../{name}", posixpath.relpath(path, W)]
    for link, real in ((f"{W}/to-home", H), (f"{W}/to-git", f"{REPO}/.git"), (f"{W}/to-hooks", f"{REPO}/.git/hooks")):
        if path.startswith(real + "/"):
            names.append(link + path[len(real):])
    names += [f"{head}/{name.upper()}", f"{head}/{name.replace('a', 'а').replace('e', 'е')}"]  # Cyrillic а, е
    return names


def tar(*members: tuple[str, str, bytes | str]) -> bytes:
    """An archive of (name, kind, content or link target) members, kinds file, dir, symlink, hardlink."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        for name, kind, body in members:
            info = tarfile.TarInfo(name)
            info.type = {"file": tarfile.REGTYPE, "dir": tarfile.DIRTYPE, "symlink": tarfile.SYMTYPE,
                         "hardlink": tarfile.LNKTYPE}[kind]
            info.mode = 0o755
            if kind in ("symlink", "hardlink"):
                info.linkname = str(body)
                t.addfile(info)
            else:
                data = body if isinstance(body, bytes) else b""
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def as_root(engine: docker.DockerClient, session_id: str, script: str) -> str:
    [container] = engine.containers.list(filters={"label": f"caisson.session={session_id}"})
    code, out = container.exec_run(["bash", "-c", script])
    assert code == 0, out
    return out.decode(errors="replace")


def attacks(s: RemoteSession) -> list[tuple[str, Callable[[int], Awaitable[Any]]]]:
    """(what, attempt) pairs; an attempt gets its number, which its payload carries."""
    found: list[tuple[str, Callable[[int], Awaitable[Any]]]] = []

    def add(what: str, attempt: Callable[[int], Awaitable[Any]]) -> None:
        found.append((what, attempt))

    for target in TARGETS:
        head, name = posixpath.split(target)
        for given in dressings(target):
            add(f"write {given}", lambda i, p=given: s.write_file(p, payload(i), mode=0o755))
            add(f"copy_in {given}", lambda i, p=given: s.copy_in(tar((posixpath.basename(p), "file", payload(i))), posixpath.dirname(p) or "."))

        async def renamed(i: int, dst: str = target) -> None:
            await s.write_file(f"{W}/src-{i}", payload(i))
            await s.rename(f"{W}/src-{i}", dst)

        add(f"rename a file onto {target}", renamed)
        add(f"copy_in {name} from {W}", lambda i, t=target: s.copy_in(tar((posixpath.relpath(t, W), "file", payload(i))), W))
        add(f"copy_in {name} with '..'", lambda i, t=target: s.copy_in(tar((f"proj/../../..{t}", "file", payload(i))), f"{H}/proj"))
        add(f"copy_in through a link member to {head}", lambda i, h=head, n=name: s.copy_in(
            tar(("l", "symlink", h), (f"l/{n}", "file", payload(i))), f"{W}/in-{uuid.uuid4().hex[:6]}"))
        add(f"copy_in a hard link member as {target}", lambda i, t=target: s.copy_in(
            tar(("proj/a", "file", payload(i)), (posixpath.relpath(t, H) if t.startswith(H) else t.lstrip("/"), "hardlink", "proj/a")),
            H if t.startswith(H) else "/"))
        # The same into a destination a tenant may write (the home's through the agent's link to
        # it): only the hard-link member's own name is refused.
        into, named = (W, f"to-home/{posixpath.relpath(target, H)}") if target.startswith(H) else (
            (W, posixpath.relpath(target, W)) if target.startswith(W) else (head, name))
        add(f"copy_in a hard link member named {named} into {into}", lambda i, d=into, n=named: s.copy_in(
            tar((f"hl-{i}", "file", payload(i)), (n, "hardlink", f"hl-{i}")), d))
        add(f"remove {target}", lambda i, t=target: s.remove(t, recursive=True))

    # A hard link is taken only to a regular file earlier in the archive (made a copy): one to a
    # file of the session (a secret's or a start-up file's other name, by any name), leading out
    # or naming a link member would make its member a name of that file. It would land as leak-N.
    for named in (".env", f"{W}/.env", "repo/.git/config", "second", "to-home/.bashrc", "to-bashrc", "dangling",
                  f"{H}/.ssh/authorized_keys", "../home/agent/.bashrc", "repo/../../home/agent/.profile",
                  "../../etc/shadow", "./../workspace/.env"):
        add(f"copy_in a hard link member to {named}", lambda i, n=named: s.copy_in(tar((f"leak-{i}", "hardlink", n)), W))
    for link_to in (f"{W}/.env", H, f"{H}/.bashrc"):
        add(f"copy_in a hard link member to a link member to {link_to}", lambda i, t=link_to: s.copy_in(
            tar((f"hs-{i}", "symlink", t), (f"leak-{i}", "hardlink", f"hs-{i}"), (f"leak-{i}-b", "hardlink", f"hs-{i}/.bashrc")), W))
    add("copy_in a hard link member to a later member", lambda i: s.copy_in(
        tar((f"leak-{i}", "hardlink", f"hf-{i}"), (f"hf-{i}", "file", payload(i))), W))
    add("copy_in a hard link member to another hard link", lambda i: s.copy_in(
        tar((f"hf-{i}", "file", payload(i)), (f"hg-{i}", "hardlink", f"hf-{i}"), (f"leak-{i}", "hardlink", f"hg-{i}")), W))

    async def link_then_write(i: int) -> None:
        await s.copy_in(tar(("l-bashrc", "symlink", f"{H}/.bashrc")), W)   # a link is harmless in itself
        await s.write_file(f"{W}/l-bashrc", payload(i))

    async def dir_into_git(i: int) -> None:
        await s.write_file(f"{W}/d-{i}/hooks/pre-commit", payload(i), mode=0o755)
        await s.rename(f"{W}/d-{i}", f"{W}/newrepo/.git")

    async def dir_holding_git(i: int) -> None:
        await s.write_file(f"{W}/e-{i}/dotgit/hooks/pre-commit", payload(i), mode=0o755)
        await s.rename(f"{W}/e-{i}/dotgit", f"{W}/e-{i}/.git")

    async def hooks_dir_swap(i: int) -> None:
        await s.write_file(f"{W}/f-{i}/pre-commit", payload(i), mode=0o755)
        await s.rename(f"{REPO}/.git/hooks", f"{W}/old-hooks-{i}")
        await s.rename(f"{W}/f-{i}", f"{REPO}/.git/hooks")

    async def mkdir_then_write(i: int) -> None:
        await s.mkdir(f"{W}/newrepo/.git/hooks")
        await s.write_file(f"{W}/newrepo/.git/hooks/pre-commit", payload(i), mode=0o755)

    async def mkdir_config_then_write(i: int) -> None:
        await s.mkdir(f"{H}/.config/git")
        await s.write_file(f"{H}/.config/git/config", payload(i))

    add("a link by copy_in, then a write through it", link_then_write)
    add("rename a directory of hooks to .git", dir_into_git)
    add("rename a directory to .git beside its hooks", dir_holding_git)
    add("rename the hooks away and another directory in", hooks_dir_swap)
    async def link_onto_hooks_path(i: int) -> None:
        await s.write_file(f"{W}/g-{i}/pre-commit", payload(i), mode=0o755)
        await s.copy_in(tar((f"husky-{i}", "symlink", f"{W}/g-{i}")), W)
        await s.rename(f"{W}/husky-{i}", f"{REPO}/.husky")

    add("a link to a directory of hooks renamed to .husky", link_onto_hooks_path)
    add("mkdir .git/hooks, then write", mkdir_then_write)
    add("mkdir ~/.config/git, then write", mkdir_config_then_write)
    add("write through the dangling link to ~/.bash_login", lambda i: s.write_file(f"{W}/dangling", payload(i)))
    add("write the second name of ~/.bashrc", lambda i: s.write_file(f"{W}/second", payload(i)))
    add("write through the link to ~/.bashrc", lambda i: s.write_file(f"{W}/to-bashrc", payload(i)))
    add("copy_in into the link to the hooks", lambda i: s.copy_in(tar(("pre-push", "file", payload(i))), f"{W}/to-hooks"))
    add("copy_in into the home", lambda i: s.copy_in(tar((".bashrc", "file", payload(i)), ("bin/ls", "file", payload(i))), H))
    add("rename the secret to a readable name", lambda i: s.rename(f"{W}/.env", f"{W}/leak-{i}.txt"))
    add("remove ~/.bashrc through its link", lambda i: s.remove(f"{W}/to-home/.bashrc"))
    return found


async def test_a_tenants_writes_plant_nothing_that_runs(sqlite_api: Api, docker_engine: docker.DockerClient) -> None:
    t = sqlite_api.tenant("tenant-writes", calls_per_minute=100_000)
    async with RemoteRuntime(sqlite_api.url, t.token) as rt, rt.session(env={"HARMLESS": "yes"}) as s:
        as_root(docker_engine, s.id, PLANT)
        before = as_root(docker_engine, s.id, LISTING)
        refused: dict[str, int] = {}
        accepted: list[str] = []  # harmless in the end (a look-alike name), or a bug: the listing tells
        tried = 0
        tries = attacks(s)
        hard_links = [what for what, _ in tries if "hard link" in what]
        with approving(t, "deny") as denied:
            for i, (what, attempt) in enumerate(tries):
                tried += 1
                try:
                    await attempt(i)
                    accepted.append(what)
                except CaissonError as exc:
                    refused[getattr(exc, "code", "error")] = refused.get(getattr(exc, "code", "error"), 0) + 1
            after = as_root(docker_engine, s.id, LISTING)
            outputs = [(await s.call("bash", {"command": command, "cwd": REPO})).text for command in TRIGGERS]
            for command in TRIGGERS:
                with contextlib.suppress(CaissonError):  # a dangerous one is denied
                    outputs.append((await s.exec(command, cwd=REPO, timeout=30)).stdout)
            # A function exported through a call's env, which bash defines for every command.
            tried += 1
            with contextlib.suppress(CaissonError):
                outputs.append((await s.exec("ls", env={"BASH_FUNC_ls%%": f"() {{ cat {W}/.env; }}"})).stdout)
            names = [e.name for e in await s.list_dir(W)]
            leaked = [name for name in names if name.startswith("leak-")]
            # The other members of the archives with hard links refused: refused whole, none may stay.
            kept = [name for name in names if name.startswith(("hs-", "hf-", "hg-", "hl-"))]
        changed = sorted(set(before.splitlines()) ^ set(after.splitlines()))
        ran = [out for out in outputs if "PLANTED-" in out or TOKEN in out]
        landed = len({line.rsplit("  ", 1)[-1] for line in changed}) + len(ran) + len(leaked) + len(kept)

        # Controls: a tenant's harmless writes work, links in its archives included.
        await s.write_file(f"{W}/notes/a.txt", b"ordinary\n")
        await s.write_file(f"{H}/proj/x", b"in the project\n")
        await s.copy_in(tar(("pkg", "dir", ""), ("pkg/m.py", "file", b"x = 1\n"), ("pkg/alias.py", "symlink", "m.py")), f"{W}/in")
        assert await s.mkdir(f"{W}/made/deeper") is True
        await s.rename(f"{W}/notes/a.txt", f"{W}/notes/b.txt")
        assert await s.remove(f"{W}/made", recursive=True) is True
        assert await s.read_file(f"{W}/notes/b.txt") == b"ordinary\n"
        assert await s.read_file(f"{H}/proj/x") == b"in the project\n"
        assert await s.read_file(f"{W}/in/pkg/alias.py") == b"x = 1\n"
        assert (await s.stat(f"{W}/in/pkg/alias.py", follow=False)).type == "symlink"
        await s.copy_in(tar(("hl/a", "file", b"one file\n"), ("hl/b", "hardlink", "hl/a")), f"{W}/in")
        assert [await s.read_file(f"{W}/in/hl/{n}") for n in "ab"] == [b"one file\n"] * 2
        assert (await s.exec("echo $HARMLESS")).stdout == "yes\n"

        # The refusal says why, and what to do instead.
        with httpx.Client(base_url=sqlite_api.url, headers=t.headers) as c:
            r = c.put(f"/v1/sessions/{s.id}/files", params={"path": f"{H}//proj/../.bashrc"}, content=b"x")
    print(f"a tenant's writes through caisson serve: tried {tried}, landed {landed} (changed {changed}, ran {ran}, "
          f"leaked {leaked}, kept {kept}); refused by code {refused}; accepted {len(accepted)}: {accepted}; {len(denied)} calls went to the tenant's approvers (denied)")
    print(f"of them, archives with hard-link members: tried {len(hard_links)}, accepted {len(set(hard_links) & set(accepted))}")
    assert set(refused) <= {"permission_denied", "hostile_archive"}  # refused by the policy, nothing else
    assert r.status_code == 403 and r.headers["content-type"] == "application/problem+json"
    assert r.json()["error"] == "permission_denied"
    assert f"{H}/.bashrc is a protected path" in r.json()["detail"] and "tool call" in r.json()["detail"]
    assert set(hard_links) & set(accepted) == set()
    assert landed == 0


RACER = f"""
import os, shutil, time
os.chdir("{W}")
os.makedirs("race-dir", exist_ok=True)
open("race.txt", "w").close()
def step(*calls):
    for call in calls:
        try:
            call()
        except OSError:
            pass
def back():  # a tenant's mkdir may have made race-dir while the link was away: the real one wins
    if os.path.isdir("race-real"):
        if os.path.islink("race-dir"):
            os.unlink("race-dir")
        elif os.path.isdir("race-dir"):
            shutil.rmtree("race-dir")
        os.rename("race-real", "race-dir")
while True:
    step(lambda: os.rename("race-dir", "race-real"), lambda: os.symlink("{REPO}/.git/hooks", "race-dir"))
    time.sleep(0.001)
    step(back)
    step(lambda: os.symlink("{H}/.bashrc", "r.tmp"), lambda: os.rename("r.tmp", "race.txt"))
    time.sleep(0.001)
    step(lambda: open("p.tmp", "w").close(), lambda: os.rename("p.tmp", "race.txt"))
"""


async def test_a_link_swapped_in_while_a_tenant_writes_lands_nothing(
    sqlite_api: Api, docker_engine: docker.DockerClient
) -> None:
    """Another writer (the agent's background process) swaps a directory for a link to the
    repository's hooks, and a file for a link to ~/.bashrc, as fast as it can, while the tenant
    writes through those names: the write is plain, so the daemon refuses a link on the way."""
    t = sqlite_api.tenant("writes-race", calls_per_minute=100_000)
    rounds = 150
    async with RemoteRuntime(sqlite_api.url, t.token) as rt, rt.session() as s:
        as_root(docker_engine, s.id, PLANT)
        before = as_root(docker_engine, s.id, LISTING)
        [container] = docker_engine.containers.list(filters={"label": f"caisson.session={s.id}"})
        container.exec_run(["python3", "-c", RACER], user="agent", detach=True)
        written: dict[str, int] = {}
        routes: dict[str, Callable[[int], Awaitable[Any]]] = {
            "write": lambda i: s.write_file(f"{W}/race-dir/pre-commit", payload(i), mode=0o755),
            "write file": lambda i: s.write_file(f"{W}/race.txt", payload(i)),
            "copy_in": lambda i: s.copy_in(tar(("post-checkout", "file", payload(i))), f"{W}/race-dir"),
            "mkdir": lambda i: s.mkdir(f"{W}/race-dir/sub-{i}"),
            "copy_in link": lambda i: s.copy_in(tar(("pre-rebase", "symlink", f"{W}/moved/m-{i}")), f"{W}/race-dir"),
            "rename": lambda i: s.rename(f"{W}/moved/m-{i}", f"{W}/race-dir/pre-push"),
            "remove": lambda i: s.remove(f"{W}/race-dir/pre-commit.sample"),
        }
        for i in range(rounds):
            await s.write_file(f"{W}/moved/m-{i}", payload(i))
        for route, attempt in routes.items():
            for i in range(rounds):
                try:
                    await attempt(i)
                    written[route] = written.get(route, 0) + 1
                except CaissonError:
                    pass
        as_root(docker_engine, s.id, "pkill -u agent -f 'race-real' || true")
        after = as_root(docker_engine, s.id, LISTING)
    changed = sorted(set(before.splitlines()) ^ set(after.splitlines()))
    landed = len({line.rsplit("  ", 1)[-1] for line in changed})
    print(f"a link raced in under a tenant's writes: tried {rounds * len(routes)}, landed {landed} ({changed}); "
          f"{written} writes went to the real, plain names")
    assert landed == 0
    assert sum(written.values()) > 0  # the race left room for plain writes: the route was really exercised


# What a session's env may not set at open: each would run at every later command, safe ones too.
START_ENVS: list[dict[str, str]] = [
    {"BASH_ENV": f"{W}/x.sh"}, {"ENV": f"{W}/x.sh"}, {"PROMPT_COMMAND": f"cat {W}/.env"},
    {"LD_PRELOAD": f"{W}/x.so"}, {"LD_LIBRARY_PATH": W}, {"PYTHONSTARTUP": f"{W}/x.py"}, {"PYTHONPATH": W},
    {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "core.fsmonitor", "GIT_CONFIG_VALUE_0": f"cat {W}/.env"},
    {"GIT_CONFIG_GLOBAL": f"{W}/gc"}, {"GIT_SSH_COMMAND": f"sh {W}/x.sh"}, {"PATH": f"{W}/bin:/usr/bin:/bin"},
    {"PATH": ":/usr/bin:/bin"}, {"PATH": "/usr/bin:/bin:."}, {"PERL5OPT": "-Mx"}, {"NODE_OPTIONS": f"--require {W}/x.js"},
    {"PAGER": f"sh {W}/x.sh"}, {"SHELLOPTS": "xtrace"}, {"PS4": "$(cat /workspace/.env)"},
    {"BASH_FUNC_ls%%": f"() {{ cat {W}/.env; }}"}, {"HOME": W}, {"XDG_CONFIG_HOME": W}, {"TMPDIR": W},
]


async def test_a_session_env_that_changes_what_runs_is_refused_at_open(sqlite_api: Api) -> None:
    t = sqlite_api.tenant("start-env")
    opened: list[dict[str, str]] = []
    answers: list[tuple[int, str, str]] = []
    with httpx.Client(base_url=sqlite_api.url, headers=t.headers, timeout=120) as c:
        for env in START_ENVS:
            r = c.post("/v1/sessions", json={"env": env})
            if r.status_code == 201:
                opened.append(env)
                c.delete(f"/v1/sessions/{r.json()['id']}")
                continue
            answers.append((r.status_code, r.json()["error"], r.json()["detail"]))
    print(f"a session's env at open: tried {len(START_ENVS)}, landed {len(opened)} ({opened})")
    assert opened == []
    assert all(status == 422 and code == "env_refused" for status, code, _ in answers)
    assert any("BASH_ENV" in detail and "every command" in detail and "start_env" in detail for *_, detail in answers)

    # The operator may allow a name explicitly, for one tenant.
    allowed = sqlite_api.tenant("start-env-allowed", start_env=["PYTHONPATH"])
    async with RemoteRuntime(sqlite_api.url, allowed.token) as rt, rt.session(env={"PYTHONPATH": "/opt/lib"}) as s:
        assert (await s.exec("echo $PYTHONPATH")).stdout == "/opt/lib\n"


async def test_the_policys_path_rules_bind_a_tenants_writes(
    sandbox_image: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch, docker_engine: docker.DockerClient
) -> None:
    """A deny rule on paths (naming no tool or command) binds the file routes as it binds tool
    calls, by every name; one restricted to deletes leaves writes alone, and one naming a tool
    is about that tool's calls. An ask rule on paths refuses them too: a file route has no
    call for the tenant's approvers to answer (before, it let every change through unasked)."""
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({"rules": [
        {"name": "vendored", "effect": "deny", "path": f"{W}/vendor/**", "message": "vendored code is read-only"},
        {"name": "keep-logs", "effect": "deny", "path": f"{W}/logs/**", "access": ["delete"]},
        {"name": "tool-only", "effect": "deny", "tool": "write_file", "path": f"{W}/toolonly/**"},
        {"name": "reviewed", "effect": "ask", "path": f"{W}/deploy/**", "access": ["write", "delete"]},
    ]}))
    monkeypatch.setenv("CAISSON_POLICY", str(policy))
    server = start_server(tmp_path / "state", sandbox_image, approval_timeout=60)
    try:
        assert server.hosted.admin_token
        t = Api(server.url, server.hosted.admin_token, "sqlite", server).tenant("path-rules")
        async with RemoteRuntime(server.url, t.token) as rt, rt.session() as s:
            as_root(docker_engine, s.id, " && ".join([
                f"mkdir -p {W}/vendor/lib {W}/logs {W}/toolonly {W}/mine/sub {W}/deploy && echo v > {W}/vendor/lib/a.py",
                f"echo d > {W}/deploy/job.yml",
                f"echo l > {W}/logs/run.log && echo m > {W}/mine/sub/m.py && chown -R agent:agent {W}",
                f"su agent -c 'ln -s {W}/vendor {W}/to-vendor && ln -s {W}/deploy {W}/to-deploy'",
            ]))
            attempts: list[tuple[str, Awaitable[Any]]] = [
                ("write", s.write_file(f"{W}/vendor/lib/a.py", b"changed")),
                ("write, new file", s.write_file(f"{W}/vendor/new.py", b"new")),
                ("write through a link", s.write_file(f"{W}/to-vendor/lib/a.py", b"changed")),
                ("write, dressed", s.write_file(f"{W}//mine/../vendor/./lib/a.py", b"changed")),
                ("copy-in", s.copy_in(tar(("lib/a.py", "file", b"changed")), f"{W}/vendor")),
                ("copy-in through a link", s.copy_in(tar(("a.py", "file", b"changed")), f"{W}/to-vendor/lib")),
                ("mkdir", s.mkdir(f"{W}/vendor/made")),
                ("remove", s.remove(f"{W}/vendor/lib/a.py")),
                ("remove the directory", s.remove(f"{W}/vendor", recursive=True)),
                ("rename out", s.rename(f"{W}/vendor/lib/a.py", f"{W}/mine/a.py")),
                ("rename in", s.rename(f"{W}/mine/sub/m.py", f"{W}/vendor/lib/a.py", overwrite=True)),
                ("rename a directory in", s.rename(f"{W}/mine", f"{W}/vendor/mine")),
                ("rename the directory away", s.rename(f"{W}/vendor", f"{W}/mine/vendor")),
                ("remove a log", s.remove(f"{W}/logs/run.log")),
                ("rename a log away", s.rename(f"{W}/logs/run.log", f"{W}/mine/run.log")),
                ("remove the logs", s.remove(f"{W}/logs", recursive=True)),
                ("write, asked", s.write_file(f"{W}/deploy/job.yml", b"changed")),
                ("write through a link, asked", s.write_file(f"{W}/to-deploy/job.yml", b"changed")),
                ("copy-in, asked", s.copy_in(tar(("deploy/new.yml", "file", b"new")), W)),
                ("mkdir, asked", s.mkdir(f"{W}/deploy/made")),
                ("remove, asked", s.remove(f"{W}/deploy/job.yml")),
                ("rename in, asked", s.rename(f"{W}/mine/sub/m.py", f"{W}/deploy/m.py")),
                ("rename the directory away, asked", s.rename(f"{W}/deploy", f"{W}/mine/deploy")),
            ]
            refused: list[str] = []
            for what, attempt in attempts:
                try:
                    await attempt
                except CaissonError as exc:
                    refused.append(what)
                    said = "needs an approval" if "asked" in what else "is denied by"
                    assert f"{said}" in str(exc) and "the session's policy rule" in str(exc), (what, exc)
            landed = [what for what, _ in attempts if what not in refused]
            after = as_root(
                docker_engine, s.id, f"cat {W}/vendor/lib/a.py {W}/logs/run.log {W}/deploy/job.yml; find {W}/vendor {W}/mine {W}/deploy | sort"
            )
            # Writes the rules leave alone: a new log (deletes only), a path a tool's rule names.
            await s.write_file(f"{W}/logs/new.log", b"appended\n")
            await s.write_file(f"{W}/toolonly/x", b"tool rules are about tool calls\n")
        print(f"the policy's path rules against a tenant's writes: tried {len(attempts)}, landed {len(landed)} {landed}")
        assert landed == []
        assert after.split() == [
            "v", "l", "d", f"{W}/deploy", f"{W}/deploy/job.yml",
            f"{W}/mine", f"{W}/mine/sub", f"{W}/mine/sub/m.py", f"{W}/vendor", f"{W}/vendor/lib", f"{W}/vendor/lib/a.py",
        ]
    finally:
        server.stop()


@pytest.fixture(scope="module")
async def copying(sqlite_api: Api) -> AsyncIterator[RemoteSession]:
    """One session for the module's copy-in tests, which use names of their own."""
    t = sqlite_api.tenant("copy-in", calls_per_minute=100_000)
    async with RemoteRuntime(sqlite_api.url, t.token) as rt, rt.session() as s:
        yield s


async def test_a_host_folder_with_hard_links_is_copied_in_as_copies(copying: RemoteSession, tmp_path: Path) -> None:
    """A host folder where one file has three names (tar writes the later ones as hard-link
    members): every name lands, with the file's content and mode, as a file of its own."""
    (tmp_path / "pkg").mkdir()
    first = tmp_path / "pkg" / "run.sh"
    first.write_bytes(b"#!/bin/sh\necho one file, three names\n")
    first.chmod(0o750)
    os.link(first, tmp_path / "pkg" / "alias.sh")
    os.link(first, tmp_path / "also.sh")
    await copying.copy_in(tmp_path, f"{W}/hard")
    names = [f"{W}/hard/pkg/run.sh", f"{W}/hard/pkg/alias.sh", f"{W}/hard/also.sh"]
    assert [await copying.read_file(n) for n in names] == [first.read_bytes()] * 3
    looks = [await copying.stat(n, follow=False) for n in names]
    assert [(st.type, st.nlink, st.mode & 0o777) for st in looks] == [("file", 1, 0o750)] * 3
    await copying.write_file(names[1], b"changed\n")
    assert await copying.read_file(names[0]) == first.read_bytes()  # a copy: the other names keep theirs


# Once a copy-in has started (its first new file is there), swaps a directory for a link to a
# repository's hooks: the directory of a late member, or in a round marked steer-N the copy-in's
# own new directory, so that its clean-up would remove the hooks of the same names. Puts
# `late` back when the test says the round is over.
SWAPPER = f"""
import os, time
os.chdir("{W}/undo")
i = 0
while True:
    while not os.path.exists("new-%d/f00" % i):
        time.sleep(0.0005)
    moved = "new-%d" % i if os.path.exists("steer-%d" % i) else "late"
    os.rename(moved, moved + "-real")
    os.symlink("{W}/undo/repo/.git/hooks", moved)
    while not os.path.exists("over-%d" % i):
        time.sleep(0.002)
    if moved == "late":
        os.unlink("late")
        os.rename("late-real", "late")
    i += 1
"""


async def test_a_copy_in_stopped_partway_keeps_nothing_it_made(
    copying: RemoteSession, docker_engine: docker.DockerClient
) -> None:
    """All or nothing. What the session holds where a member would land is decided before the
    first write (a link on the way, a directory for a file, a file with other names): such an
    archive writes nothing. Then the agent swaps a directory of a late member for a link to a
    repository's hooks while the copy-in writes its earlier members: the late member is
    refused, the new directories, files and links made before it are removed again, and the
    existing file it had replaced has its old content back (before: "whose old content is
    gone")."""
    s = copying
    u = f"{W}/undo"
    as_root(docker_engine, s.id, " && ".join([
        f"mkdir -p {u}/late {u}/adir && git init -q {u}/repo && echo old > {u}/late/x && echo old > {u}/existing.txt",
        f"echo secret > {u}/secret && ln {u}/secret {u}/second && chown -R agent:agent {u} && echo root > {u}/rootfile",
        f"echo ro > {u}/readonly && chown agent: {u}/readonly && chmod 444 {u}/readonly",
        f"su agent -c 'ln -s {u}/repo/.git/hooks {u}/to-hooks'",
    ]))
    # Hooks of the names the archive's new directory holds: what a steered clean-up would remove.
    as_root(docker_engine, s.id, f"su agent -c 'cd {u}/repo/.git/hooks && touch f0{{0..9}} f1{{0..9}} f2{{0..9}} alias same"
            " && mkdir -p sub/deeper && touch sub/deeper/g'")
    hooks_before = as_root(docker_engine, s.id, f"find {u}/repo/.git/hooks | sort")

    def archive(tag: str, *late: tuple[str, str, bytes | str]) -> bytes:
        early: list[tuple[str, str, bytes | str]] = [(f"new-{tag}", "dir", ""), (f"new-{tag}/sub/deeper", "dir", "")]
        early += [(f"new-{tag}/f{n:02d}", "file", f"early {n}\n".encode()) for n in range(30)]
        early += [(f"new-{tag}/sub/deeper/g", "file", b"deep\n"), (f"new-{tag}/alias", "symlink", "f00"),
                  (f"new-{tag}/same", "hardlink", f"new-{tag}/f01"), ("existing.txt", "file", b"from the archive\n")]
        return tar(*early, *late)

    # Known before the first write: refused whole, nothing written.
    static = {
        "a member beneath the agent's link": archive("s0", ("to-hooks/pre-commit", "file", payload(0))),
        "a file onto a directory": archive("s1", ("adir", "file", b"x")),
        "a directory onto a file": archive("s2", ("late/x/sub", "dir", "")),
        "a link onto a directory": archive("s3", ("adir", "symlink", "late")),
        "a file with another name": archive("s4", ("second", "file", b"overwritten\n")),
        # Found by opening it for writing as the agent, as the write would (before, the write
        # found it, after the archive's new files and existing.txt were written).
        "a file the agent may not write (root's)": archive("s5", ("rootfile", "file", b"x")),
        "a read-only file of the agent's own": archive("s6", ("readonly", "file", b"x")),
    }
    wrote: list[str] = []
    for what, body in static.items():
        with pytest.raises(CaissonError, match="nothing was written"):
            await s.copy_in(body, u)
        if [e.name for e in await s.list_dir(u) if e.name.startswith("new-")] or (await s.read_file(f"{u}/existing.txt")) != b"old\n":
            wrote.append(what)
    print(f"archives refused up front: tried {len(static)}, wrote something {len(wrote)} {wrote}")
    assert as_root(docker_engine, s.id, f"cat {u}/rootfile {u}/readonly") == "root\nro\n"

    # Stopped partway by the agent: at a file member replacing late/x, at a new link member in
    # late/, or at its own new directory swapped for a link (its clean-up steered at the hooks).
    [container] = docker_engine.containers.list(filters={"label": f"caisson.session={s.id}"})
    container.exec_run(["python3", "-c", SWAPPER], user="agent", detach=True)
    kinds = ("late file", "late link", "steered")
    rounds = 9
    stopped = dict.fromkeys(kinds, 0)
    said: dict[str, list[str]] = {kind: [] for kind in kinds}
    left: list[str] = []
    clobbered: list[int] = []
    try:
        for i in range(rounds):
            kind = kinds[i % 3]
            if kind == "steered":
                await s.write_file(f"{u}/steer-{i}", b"")
            late = (f"late/lnk-{i}", "symlink", "x") if kind == "late link" else ("late/x", "file", payload(i))
            before = f"old {i}\n".encode()  # each round's own, so each round's loss shows
            await s.write_file(f"{u}/existing.txt", before)
            try:
                await s.copy_in(archive(str(i), late), u)
            except CaissonError as exc:
                stopped[kind] += 1
                said[kind].append(str(exc))
                if kind != "steered" and await s.read_file(f"{u}/existing.txt") != before:
                    clobbered.append(i)
                if kind != "steered":  # there the agent moved the directory away itself
                    left += [e.name for e in await s.list_dir(u) if e.name == f"new-{i}"]
            await s.write_file(f"{u}/over-{i}", b"")
            while (await s.stat(f"{u}/late", follow=False)).type != "dir":
                await anyio.sleep(0.01)
    finally:
        as_root(docker_engine, s.id, "pkill -u agent -f 'late-real' || true")
    hooks_after = as_root(docker_engine, s.id, f"find {u}/repo/.git/hooks | sort")
    changed = sorted(set(hooks_after.split()) ^ set(hooks_before.split()))
    print(f"copy-ins stopped partway by a link swapped in: tried {rounds}, stopped {stopped}; left behind {len(left)} "
          f"{left}; hooks written or removed through the link {len(changed)} {changed}")
    print(f"what the tenant is told: {[found[0] for found in said.values() if found]}")
    print(f"an existing file replaced before the stop: tried {stopped['late file'] + stopped['late link']}, "
          f"its old content lost {len(clobbered)} {clobbered}")
    assert wrote == []
    assert all(stopped.values())  # each race was really run
    assert left == [] and changed == []
    stops = said["late file"] + said["late link"]
    assert clobbered == []
    assert all("nothing of the archive was kept" in m and "the existing files it had replaced (1) have their old content back" in m
               and f"{u}/existing.txt" not in m for m in stops), stops
    assert all("could not be removed again" in m and "symbolic link" in m for m in said["steered"]), said["steered"]


async def test_a_copy_in_that_fills_the_disk_keeps_nothing_it_made(
    sqlite_api: Api, docker_engine: docker.DockerClient
) -> None:
    """A copy-in larger than what is left of the session's disk quota (the kernel's hard limit)
    stops at the full disk partway through its new files: the tenant is told so, the files it
    had written are removed again, an existing file it would have replaced keeps its content,
    and the space is the session's again."""
    t = sqlite_api.tenant("full-disk", calls_per_minute=100_000)
    async with RemoteRuntime(sqlite_api.url, t.token) as rt, rt.session(limits={"disk": "64m"}) as s:
        d = f"{W}/full"
        filled = await s.exec(f"mkdir -p {d} && echo old > {d}/existing.txt && head -c 40M /dev/urandom > {W}/fill && echo ok")
        assert filled.stdout == "ok\n", filled.stderr
        # 12 new files of 3 MiB (36 MiB, more than the 24 MiB left), then one replacing a file.
        members: list[tuple[str, str, bytes | str]] = [("new", "dir", "")]
        members += [(f"new/f{n:02d}", "file", os.urandom(3 << 20)) for n in range(12)]
        members.append(("existing.txt", "file", b"from the archive\n"))
        with pytest.raises(CaissonError) as full:
            await s.copy_in(tar(*members), d)
        said = str(full.value)
        print(f"a copy-in past the disk quota: {said[:300]}")
        left = [e.name for e in await s.list_dir(d)]
        print(f"left in the destination: {left}")
        assert "quota" in said.lower() or "space" in said.lower(), said
        assert "nothing of the archive was kept" in said, said
        assert left == ["existing.txt"]
        assert await s.read_file(f"{d}/existing.txt") == b"old\n"
        # The removed files' space is given back once btrfs commits (a sync forces it).
        as_root(docker_engine, s.id, "sync")
        deadline = anyio.current_time() + 60
        while True:
            after = await s.exec(f"head -c 16M /dev/zero > {d}/after && echo written")
            if after.stdout == "written\n" or anyio.current_time() > deadline:
                break
            await anyio.sleep(2)
        assert after.stdout == "written\n", after.stderr


async def test_a_stopped_copy_ins_put_back_lands_only_on_what_it_wrote(rt: Runtime) -> None:
    """Beside the reported case (the old content put back): the put-back is itself a write the
    agent can race. Attacked on a real session with what the agent could do between the
    copy-in's write and its stop: change the file again (its change stays), swap it for a
    link to another of its files or to a hooks file (nothing is written through the link),
    remove it (nothing is made again). Each is named as not put back; an untouched file gets
    its old content and mode back."""
    async with rt.session() as s:
        w = "/workspace/put-back"
        await s.exec(f"mkdir -p {w}/repo/.git/hooks && echo hook > {w}/repo/.git/hooks/pre-commit && echo other > {w}/other")
        wrote = b"from the archive\n"
        olds: dict[str, _Old] = {}
        for name in ("untouched", "changed", "to-other", "to-hook", "removed"):
            await s.write_file(f"{w}/{name}", b"old content\n", mode=0o600)
            done = await s.write_file(f"{w}/{name}", wrote, mode=0o644, keep_old=KEEP_OLD)
            assert done.old == b"old content\n"
            olds[f"{w}/{name}"] = _Old(done.old, 0o600, done.sha256)
        await s.exec(f"cd {w} && echo agent > changed && rm to-other to-hook removed && ln -s other to-other "
                     f"&& ln -s repo/.git/hooks/pre-commit to-hook")
        lost = await _restore(SimpleNamespace(agent=s), olds)  # type: ignore[arg-type]
        named = sorted(entry.split(" (", 1)[0].rsplit("/", 1)[1] for entry in lost)
        after = {name: (await s.exec(f"cat {w}/{name}")).stdout for name in ("untouched", "changed", "other")}
        hook = (await s.exec(f"cat {w}/repo/.git/hooks/pre-commit")).stdout
        removed = (await s.stat(f"{w}/removed", follow=False)).exists
        mode = (await s.stat(f"{w}/untouched")).mode & 0o777
        through = int(after["other"] != "other\n") + int(hook != "hook\n") + int(removed)
        print(f"put-backs raced by the agent: tried 4, landed on something else {through}; not put back and named: {named}")
        assert named == ["changed", "removed", "to-hook", "to-other"]
        assert after == {"untouched": "old content\n", "changed": "agent\n", "other": "other\n"} and mode == 0o600
        assert hook == "hook\n" and not removed
