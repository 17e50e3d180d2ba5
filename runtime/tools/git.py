"""git tools. git runs inside the container (as the agent user, argv only, no shell) and
its machine-readable output (porcelain, -z, custom formats) is parsed into structured
results. No credential ever enters the container through these tools: the environment
only disables prompts, so an authenticated push fails clearly instead of hanging."""

from __future__ import annotations

import posixpath
import re
import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import anyio
from pydantic import Field, model_validator

from caisson.client.models import ExecResult
from caisson.errors import OpError
from caisson.policy import Level
from caisson.tools.base import ToolError, ToolInput, ToolResult, tool
from caisson.tools.search.listing import EXCLUDED_DIR, FIND_TIMEOUT, glob_regex
from caisson.tools.text import shown_name

if TYPE_CHECKING:
    from caisson.tools.context import ToolContext

# git runs hermetically: no system, global or XDG configuration (the agent's home is a
# writable root), no system attributes, no prompts, pagers or editors.
GIT_ENV = {
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_SSH_COMMAND": "ssh -o BatchMode=yes",
    "GIT_PAGER": "cat",
    "PAGER": "cat",
    "GIT_EDITOR": "true",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_ATTR_NOSYSTEM": "1",
    "GIT_OPTIONAL_LOCKS": "0",
    "LC_ALL": "C",
}
# Command-line configuration outranks the repository's own and reaches every git it starts:
# no hooks, no fsmonitor, no signing program, no credential helper, no ext:: transport, no
# directory that merely looks like a bare repository, no submodule's own configuration.
GIT_CONFIG = (
    "core.fsmonitor=false", "core.hooksPath=/dev/null", "core.pager=cat", "core.editor=true",
    "sequence.editor=true", "commit.gpgSign=false", "tag.gpgSign=false", "credential.helper=",
    "protocol.ext.allow=never", "safe.bareRepository=explicit", "diff.ignoreSubmodules=all",
    "submodule.recurse=false", "gc.auto=0", "maintenance.auto=false",
)
GIT = ("git", *(arg for setting in GIT_CONFIG for arg in ("-c", setting)))
# Repository settings that make git run a program the command line cannot switch off one by
# one (drivers are named by .gitattributes): a git tool refuses such a repository.
EXECUTING_CONFIG = re.compile(
    r"(?:filter\..+\.(?:clean|smudge|process)|diff\..+\.(?:textconv|command)|merge\..+\.driver|diff\.external|"
    r"core\.worktree|core\.gitproxy|core\.sshcommand|core\.askpass|remote\..+\.(?:uploadpack|receivepack)|"
    r"trailer\..+\.(?:command|cmd))"
)
DIFF_MAX = 1024 * 1024
# Secret files git_diff compares contents with, at most (found below the repository's top).
SECRET_SCAN_LIMIT = 10_000
FIELD = "\x1f"

# stderr fragments -> (code, message); first match wins. LC_ALL=C keeps them in English.
ERRORS: list[tuple[str, str, str]] = [
    ("not a git repository", "not_a_repository", "{repo} is not a git repository"),
    ("cannot use bare repository", "bare_repository_refused",
     "git tools do not use {repo}: it looks like a bare repository, whose configuration the agent may have "
     "written; name the repository's working tree instead"),
    ("dubious ownership", "unsafe_repository", "git refuses {repo}: the repository belongs to another user"),
    ("please tell me who you are", "identity_missing",
     "git needs an author identity: set user.name and user.email (git config) in the repository"),
    ("unable to auto-detect email", "identity_missing",
     "git needs an author identity: set user.name and user.email (git config) in the repository"),
    ("invalid reference", "unknown_ref", "{detail}"),
    ("unknown revision", "unknown_ref", "{detail}"),
    ("bad revision", "unknown_ref", "{detail}"),
    ("not a valid object name", "unknown_ref", "{detail}"),
    ("not a valid branch name", "invalid_name", "{detail}"),
    ("is not a valid branch name", "invalid_name", "{detail}"),
    ("did not match any file(s) known to git", "unknown_ref", "{detail}"),
    ("already exists", "branch_exists", "{detail}"),
    ("not fully merged", "not_merged", "{detail} (use force to delete it anyway)"),
    ("cannot delete branch", "branch_checked_out", "{detail}"),
    ("would be overwritten", "uncommitted_changes", "{detail}"),
    ("pathspec", "unknown_path", "{detail}"),
    ("does not appear to be a git repository", "unknown_remote", "{detail}"),
    ("no such remote", "unknown_remote", "{detail}"),
    ("could not read username", "auth_required",
     "the remote needs credentials, and caisson never passes credentials into the sandbox: {detail}"),
    ("authentication failed", "auth_required",
     "the remote needs credentials, and caisson never passes credentials into the sandbox: {detail}"),
    ("permission denied (publickey", "auth_required",
     "the remote needs credentials, and caisson never passes credentials into the sandbox: {detail}"),
    ("could not resolve host", "network_unavailable", "{detail}"),
    ("[rejected]", "push_rejected", "{detail} (fetch and merge first, or push with force)"),
    ("failed to push", "push_rejected", "{detail}"),
    ("not found", "unknown_ref", "{detail}"),
]


def git_error(res: ExecResult, repo: str) -> ToolError:
    detail = (res.stderr.strip() or res.stdout.strip() or f"git exited with code {res.exit_code}")[:2000]
    lowered = detail.lower()
    for fragment, code, template in ERRORS:
        if fragment in lowered:
            return ToolError(code, template.format(repo=repo, detail=detail), {"stderr": res.stderr})
    if res.timed_out:
        return ToolError("timeout", f"git timed out: {detail}")
    return ToolError("git_error", detail, {"stderr": res.stderr, "exit_code": res.exit_code})


async def run_git(
    ctx: ToolContext, repo: str, *argv: str, timeout: float = 60.0, stdout_max: int = DIFF_MAX
) -> ExecResult:
    await refuse_executing_config(ctx, repo)
    return await _git(ctx, repo, argv, timeout, stdout_max)


async def refuse_executing_config(ctx: ToolContext, repo: str) -> None:
    """Refuse (once per call and repository) a repository whose configuration, its includes
    among it, asks git to run a program: that needs the agent's bash and its approval."""
    checked = (ctx.call_id, repo)
    if ctx.state.get("git_config_checked") == checked:
        return
    res = await _git(ctx, repo, ("config", "--list", "-z", "--includes"), 30.0, DIFF_MAX)
    for entry in res.stdout.split("\0") if res.exit_code == 0 else []:
        key, _, value = entry.partition("\n")
        if value.strip() and EXECUTING_CONFIG.fullmatch(key.lower()):
            raise ToolError(
                "repository_config_runs_programs",
                f"the repository's configuration sets {key} = {value.strip()[:200]!r}, which makes git run a "
                "program; git tools refuse such a repository. Remove the setting, or run git through bash "
                "(which needs approval).",
            )
    ctx.state["git_config_checked"] = checked


async def _git(ctx: ToolContext, repo: str, argv: tuple[str, ...], timeout: float, stdout_max: int) -> ExecResult:
    try:
        return await ctx.client.exec(
            [*GIT, *argv], cwd=repo, env=GIT_ENV, timeout=timeout, stdout_max=stdout_max, stderr_max=64 * 1024
        )
    except OpError as exc:
        if exc.code == "cwd_not_found":
            raise ToolError("not_found", f"repository path {repo} is not an existing directory") from None
        if exc.code == "command_not_found":
            raise ToolError("git_not_found", "git is not installed in the sandbox") from None
        raise


async def git_ok(ctx: ToolContext, repo: str, *argv: str, timeout: float = 60.0, stdout_max: int = DIFF_MAX) -> str:
    """stdout of a git command that must succeed; a ToolError naming the problem otherwise."""
    res = await run_git(ctx, repo, *argv, timeout=timeout, stdout_max=stdout_max)
    if res.exit_code != 0:
        raise git_error(res, repo)
    return res.stdout


# ---- parsing --------------------------------------------------------------------------------


@dataclass
class BranchLine:
    branch: str | None
    upstream: str | None = None
    ahead: int = 0
    behind: int = 0


def parse_branch_header(line: str) -> BranchLine:
    """The ``## ...`` line of ``git status --porcelain --branch``."""
    head = line[3:] if line.startswith("## ") else line
    if head.startswith("No commits yet on "):
        return BranchLine(head.removeprefix("No commits yet on "))
    if head.startswith("Initial commit on "):
        return BranchLine(head.removeprefix("Initial commit on "))
    if head.startswith("HEAD (no branch)"):
        return BranchLine(None)
    track = re.search(r" \[(.*)\]$", head)
    if track:
        head = head[: track.start()]
    branch, _, upstream = head.partition("...")
    info = BranchLine(branch, upstream or None)
    if track:
        for part in track.group(1).split(", "):
            kind, _, count = part.partition(" ")
            if kind == "ahead" and count.isdigit():
                info.ahead = int(count)
            elif kind == "behind" and count.isdigit():
                info.behind = int(count)
    return info


def parse_status(output: str) -> tuple[BranchLine | None, list[dict[str, Any]]]:
    """``git status --porcelain=v1 -z --branch`` -> branch info and entries."""
    records = output.split("\0")
    branch = None
    entries: list[dict[str, Any]] = []
    i = 0
    while i < len(records):
        record = records[i]
        i += 1
        if not record:
            continue
        if record.startswith("## "):
            branch = parse_branch_header(record)
            continue
        xy, path = record[:2], record[3:]
        entry: dict[str, Any] = {"status": xy, "index": xy[0], "worktree": xy[1], "path": path, "orig_path": None}
        if "R" in xy or "C" in xy:
            entry["orig_path"] = records[i] if i < len(records) else None
            i += 1
        entries.append(entry)
    return branch, entries


LOG_FORMAT = FIELD.join(["%H", "%h", "%aI", "%an", "%ae", "%s", "%b"])


def parse_log(output: str) -> list[dict[str, str]]:
    """``git log -z --format=LOG_FORMAT`` -> commits."""
    commits = []
    for record in output.split("\0"):
        record = record.strip("\n")
        if not record:
            continue
        parts = record.split(FIELD, 6)
        if len(parts) < 7:
            continue
        full, short, date, name, email, subject, body = parts
        commits.append(
            {"hash": full, "short_hash": short, "date": date, "author_name": name, "author_email": email,
             "message": subject, "body": body.strip()}
        )
    return commits


BRANCH_FORMAT = "%(HEAD)%00%(refname:short)%00%(objectname:short)%00%(upstream:short)"


def parse_branches(output: str) -> list[dict[str, Any]]:
    branches = []
    for line in output.splitlines():
        parts = line.split("\0")
        if len(parts) < 4:
            continue
        head, name, commit, upstream = parts[:4]
        branches.append({"name": name, "current": head == "*", "commit": commit, "upstream": upstream or None})
    return branches


# ---- tools ------------------------------------------------------------------------------------


class RepoInput(ToolInput):
    cwd: str | None = Field(None, description="Repository path (default: the session's working directory)")


def _repo(ctx: ToolContext, args: RepoInput) -> str:
    return ctx.resolve(args.cwd) if args.cwd else ctx.cwd


def _repo_paths(args: Any) -> list[str]:
    return [args.cwd or "."]


class GitStatusInput(RepoInput):
    pass


@tool(
    "git_status",
    GitStatusInput,
    level=Level.SAFE,
    access="read",
    snippet="Working-tree status of a git repository: changed files and whether it is clean",
    paths=_repo_paths,
)
async def git_status(ctx: ToolContext, args: GitStatusInput) -> ToolResult:
    repo = _repo(ctx, args)
    out = await git_ok(ctx, repo, "--no-optional-locks", "status", "--porcelain=v1", "-z", "--branch")
    branch, entries = parse_status(out)
    data = {
        "branch": branch.branch if branch else None,
        "upstream": branch.upstream if branch else None,
        "ahead": branch.ahead if branch else 0,
        "behind": branch.behind if branch else 0,
        "entries": entries,
        "is_clean": not entries,
    }
    where = f"On branch {data['branch']}" if data["branch"] else "HEAD detached"
    if not entries:
        return ToolResult.success(f"{where}\nnothing to commit, working tree clean", data)
    lines = [where] + [
        f"{e['status']} {shown_name(e['orig_path'])} -> {shown_name(e['path'])}"
        if e["orig_path"]
        else f"{e['status']} {shown_name(e['path'])}"
        for e in entries
    ]
    return ToolResult.success("\n".join(lines), data)


class GitLogInput(RepoInput):
    max_count: int = Field(20, ge=1, le=1000, description="Maximum commits to return")
    ref: str | None = Field(None, description="Branch, tag or commit to start from (default HEAD)")
    path: str | None = Field(None, description="Only commits touching this path")


@tool(
    "git_log",
    GitLogInput,
    level=Level.SAFE,
    access="read",
    snippet="Recent commits: hash, date, author, message",
    paths=_repo_paths,
)
async def git_log(ctx: ToolContext, args: GitLogInput) -> ToolResult:
    repo = _repo(ctx, args)
    argv = ["log", "-z", f"--format={LOG_FORMAT}", f"--max-count={args.max_count}"]
    if args.ref:
        argv += ["--end-of-options", args.ref]
    if args.path:
        argv += ["--", args.path]
    res = await run_git(ctx, repo, *argv)
    if res.exit_code != 0:
        if "does not have any commits yet" in res.stderr:
            return ToolResult.success("No commits yet.", {"commits": []})
        raise git_error(res, repo)
    commits = parse_log(res.stdout)
    if not commits:
        return ToolResult.success("No commits.", {"commits": []})
    lines = [f"{c['short_hash']} {c['date']} {c['author_name']} <{c['author_email']}> {c['message']}" for c in commits]
    return ToolResult.success("\n".join(lines), {"commits": commits})


class GitDiffInput(RepoInput):
    path: str | None = Field(None, description="Limit the diff to this file or directory")
    staged: bool = Field(False, description="Show staged (cached) changes instead of unstaged ones")
    ref: str | None = Field(None, description="Compare against this commit, branch or tag")


@tool(
    "git_diff",
    GitDiffInput,
    level=Level.SAFE,
    access="read",
    snippet="Unified diff of a git repository (unstaged, staged, or against a ref)",
    paths=_repo_paths,
)
async def git_diff(ctx: ToolContext, args: GitDiffInput) -> ToolResult:
    repo = _repo(ctx, args)
    argv = ["diff", "--no-color", "--no-ext-diff"]
    if args.staged:
        argv.append("--cached")
    if args.ref:
        argv += ["--end-of-options", args.ref]
    pathspecs = [args.path] if args.path else []
    secrets = await _hidden_files(ctx, repo, argv, pathspecs)
    if secrets:
        # A diff shows contents: the files a read would refuse stay out of it.
        pathspecs = (pathspecs or [":(top)"]) + [":(top,exclude,literal)" + name for name in secrets]
    res = await run_git(ctx, repo, *argv, "--", *pathspecs, stdout_max=DIFF_MAX)
    if res.exit_code != 0:
        raise git_error(res, repo)
    data = {"diff": res.stdout, "truncated": res.stdout_truncated}
    if not res.stdout:
        return ToolResult.success("No changes.", data)
    note = "\n[Diff truncated due to size limit]" if res.stdout_truncated else ""
    return ToolResult.success(res.stdout + note, data, truncated=res.stdout_truncated)


async def _hidden_files(ctx: ToolContext, repo: str, diff: list[str], pathspecs: list[str]) -> list[str]:
    """The files ``diff`` would show that must stay out of it, as paths from the top of the
    repository: those the policy counts as secrets; those with other names in the working
    tree (one may be a secret's, as for a read); and those whose content, on either side, is
    a secret file's whatever their names (a hard link to a secret staged, then removed,
    leaves the secret under a harmless name with no other name left to see). Renames are
    listed as a removal and an addition, so both names count."""
    raw = await git_ok(ctx, repo, diff[0], "--raw", "--no-renames", "--no-abbrev", "-z", *diff[1:], "--", *pathspecs)
    fields = raw.split("\0")
    blobs: dict[str, set[str]] = {}
    for meta, name in zip(fields[0::2], fields[1::2], strict=False):  # ":mode mode old new status", path
        parts = meta.split()
        if len(parts) >= 4:
            blobs.setdefault(name, set()).update(parts[2:4])
    if not blobs:
        return []
    top = (await git_ok(ctx, repo, "rev-parse", "--show-toplevel")).strip()
    secret = [name for name in blobs if ctx.is_secret(posixpath.join(top, name))]
    others = set(blobs).difference(secret)
    linked: list[str] = []
    limiter = anyio.CapacityLimiter(16)

    async def check(name: str) -> None:
        async with limiter:
            try:
                st = await ctx.client.stat(posixpath.join(top, name), follow=False)
            except OpError:
                return  # not in the working tree (removed, or out of reach): no other name
        if st.exists and st.nlink > 1:
            linked.append(name)

    async with anyio.create_task_group() as tg:
        for name in others:
            tg.start_soon(check, name)
    others.difference_update(linked)
    contents = await _secret_blobs(ctx, top) if others else set()
    return secret + sorted(linked) + sorted(name for name in others if blobs[name] & contents)


# git's id of the empty blob: an empty secret file holds nothing to hide.
EMPTY_BLOB = "e69de29bb2d1d6434b8b29ae775a4c8d2e3bf9d1"


async def _secret_blobs(ctx: ToolContext, top: str) -> set[str]:
    """git's ids of the contents of the secret files below the repository's ``top``, hidden
    and ignored ones included (hashed as they are: no filter of the repository's runs)."""
    names = "|".join(glob_regex("**/" + glob).pattern for glob in ctx.secret_name_globs())
    found = await ctx.client.find(
        top, f"(?si)(?:{names})", hidden=True, no_ignore=True, globs=[EXCLUDED_DIR], sort="path",
        limit=SECRET_SCAN_LIMIT, timeout=FIND_TIMEOUT,
    )
    paths = [posixpath.join(top, path) for path, _ in found.files]
    paths = [path for path in paths if ctx.is_secret(path) and "\n" not in path]
    if not paths:
        return set()
    # One git per file: a file it cannot read (gone meanwhile, or planted unreadable ahead of
    # the others) must not end the list, as it would end one `--stdin-paths` run.
    res = await ctx.client.exec(
        ["sh", "-c", _HASH_EACH], cwd=top, env=GIT_ENV, stdin="\n".join(paths) + "\n",
        timeout=FIND_TIMEOUT, stdout_max=64 * len(paths) + 1024,
    )
    return set(res.stdout.split()) - {EMPTY_BLOB, "-"}


_HASH_EACH = (
    f'while IFS= read -r p; do {shlex.join(GIT)} hash-object --no-filters -- "$p" 2>/dev/null || echo -; done'
)


class GitCommitInput(RepoInput):
    message: str = Field(min_length=1, description="Commit message")
    files: list[str] | None = Field(
        None, description="Files to stage and commit (default: all changes, including untracked files)"
    )


@tool(
    "git_commit",
    GitCommitInput,
    level=Level.CAUTIOUS,
    access="write",
    snippet="Stage files (default: all changes) and commit; returns the commit hash and branch",
    paths=lambda a: [a.cwd or "."] + [posixpath.join(a.cwd or ".", f) for f in a.files or []],
)
async def git_commit(ctx: ToolContext, args: GitCommitInput) -> ToolResult:
    repo = _repo(ctx, args)
    if args.files:
        await git_ok(ctx, repo, "add", "--", *args.files)
    else:
        await git_ok(ctx, repo, "add", "-A")
    res = await run_git(ctx, repo, "commit", "-q", "-m", args.message)
    if res.exit_code != 0:
        if "nothing to commit" in res.stdout or "nothing added to commit" in res.stdout:
            raise ToolError("nothing_to_commit", "Nothing to commit: the working tree has no changes to record.")
        raise git_error(res, repo)
    commit_hash, branch = (await git_ok(ctx, repo, "rev-parse", "HEAD", "--abbrev-ref", "HEAD")).split()[:2]
    branch_name = None if branch == "HEAD" else branch
    data = {"commit_hash": commit_hash, "short_hash": commit_hash[:7], "branch": branch_name, "message": args.message}
    return ToolResult.success(f"Committed {commit_hash[:7]} on {branch_name or 'detached HEAD'}: {args.message}", data)


class GitBranchInput(RepoInput):
    action: Literal["list", "create", "delete"] = Field("list", description="list, create or delete")
    branch: str | None = Field(None, description="Branch name (create and delete)")
    start_point: str | None = Field(None, description="Commit, tag or branch for the new branch (default HEAD)")
    force: bool = Field(False, description="create: reset an existing branch; delete: even if not merged")

    @model_validator(mode="after")
    def _needs_branch(self) -> GitBranchInput:
        if self.action != "list" and not self.branch:
            raise ValueError(f"action {self.action} needs `branch`")
        return self


@tool(
    "git_branch",
    GitBranchInput,
    level=Level.CAUTIOUS,
    access="write",
    snippet="List, create or delete git branches",
    paths=_repo_paths,
)
async def git_branch(ctx: ToolContext, args: GitBranchInput) -> ToolResult:
    repo = _repo(ctx, args)
    if args.action == "list":
        out = await git_ok(ctx, repo, "for-each-ref", f"--format={BRANCH_FORMAT}", "refs/heads")
        branches = parse_branches(out)
        current = next((b["name"] for b in branches if b["current"]), None)
        if not branches:
            return ToolResult.success("No branches yet.", {"branches": [], "current": None})
        lines = [f"{'*' if b['current'] else ' '} {b['name']} {b['commit']}" for b in branches]
        return ToolResult.success("\n".join(lines), {"branches": branches, "current": current})
    name = args.branch or ""
    if args.action == "create":
        argv = ["branch"] + (["--force"] if args.force else []) + ["--end-of-options", name]
        if args.start_point:
            argv.append(args.start_point)
        await git_ok(ctx, repo, *argv)
        where = f" at {args.start_point}" if args.start_point else ""
        return ToolResult.success(f"Created branch {name}{where}.", {"branch": name, "action": "create"})
    await git_ok(ctx, repo, "branch", "-D" if args.force else "-d", "--end-of-options", name)
    return ToolResult.success(f"Deleted branch {name}.", {"branch": name, "action": "delete"})


class GitCheckoutInput(RepoInput):
    branch: str = Field(min_length=1, description="Branch, tag or commit to check out")
    new_branch: str | None = Field(None, description="Create this branch at `branch` and check it out")


@tool(
    "git_checkout",
    GitCheckoutInput,
    level=Level.CAUTIOUS,
    access="write",
    snippet="Switch to a branch, tag or commit (optionally creating a new branch there)",
    paths=_repo_paths,
)
async def git_checkout(ctx: ToolContext, args: GitCheckoutInput) -> ToolResult:
    repo = _repo(ctx, args)
    argv = ["checkout", "-q"]
    if args.new_branch:
        argv += ["-b", args.new_branch]
    # The trailing "--" makes git read `branch` as a ref, never as a file to restore.
    await git_ok(ctx, repo, *argv, args.branch, "--")
    branch = (await git_ok(ctx, repo, "rev-parse", "--abbrev-ref", "HEAD")).strip()
    if branch == "HEAD":
        commit = (await git_ok(ctx, repo, "rev-parse", "--short", "HEAD")).strip()
        return ToolResult.success(
            f"HEAD is now detached at {commit} ({args.branch}).", {"branch": None, "detached": True, "commit": commit}
        )
    return ToolResult.success(f"Switched to branch {branch}.", {"branch": branch, "detached": False})


class GitPushInput(RepoInput):
    remote: str = Field("origin", description="Remote name")
    branch: str | None = Field(None, description="Branch to push (default: the current branch)")
    set_upstream: bool = Field(False, description="Set the upstream tracking reference (-u)")
    force: bool = Field(False, description="Force push: overwrites the remote's history")


@tool(
    "git_push",
    GitPushInput,
    level=Level.DANGEROUS,
    access="network",
    snippet="Push a branch to a remote (no credentials are passed into the sandbox)",
    paths=_repo_paths,
)
async def git_push(ctx: ToolContext, args: GitPushInput) -> ToolResult:
    repo = _repo(ctx, args)
    branch = args.branch
    if not branch:
        branch = (await git_ok(ctx, repo, "rev-parse", "--abbrev-ref", "HEAD")).strip()
        if branch == "HEAD":
            raise ToolError("detached_head", "HEAD is detached: name the branch to push")
    argv = ["push", "--porcelain"]
    if args.set_upstream:
        argv.append("--set-upstream")
    if args.force:
        argv.append("--force")
    res = await run_git(ctx, repo, *argv, "--end-of-options", args.remote, branch, timeout=120.0)
    if res.exit_code != 0:
        raise git_error(res, repo)
    summary = "\n".join(line for line in res.stdout.splitlines() if line and not line.startswith("To "))
    data = {"remote": args.remote, "branch": branch, "output": res.stdout, "forced": args.force}
    return ToolResult.success(f"Pushed {branch} to {args.remote}." + (f"\n{summary}" if summary else ""), data)
