"""The `agentloop` profile: seed 004 ("AgentLoop" tools) served exactly as written.

Tool names are AgentLoop's (``file-read``, ``code_run``, ``git-status`` ...), arguments are
its camelCase ones, timeouts are milliseconds, paths are relative to the workspace root
(the session's workdir) and may not leave it, and results are its JSON objects (or plain
strings for calculate, diff, run and plan-and-run). Each tool carries its documented
permission level. plan, run and plan-and-run need a language model: they are served
through a host hook (runtime/profiles/hooks.py).
"""

from __future__ import annotations

import base64
import binascii
import posixpath
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field, PrivateAttr

from caisson.policy import Level
from caisson.profiles.base import Profile, ProfileTool, canonical_args
from caisson.profiles.hooks import hook_tool
from caisson.tools.base import REGISTRY, Tool, ToolError, ToolInput, ToolResult
from caisson.tools.text import glob_regex, op_errors, shown_json

if TYPE_CHECKING:
    from caisson.tools.context import ToolContext

NAME = "agentloop"
SAFE, CAUTIOUS, DANGEROUS = Level.SAFE, Level.CAUTIOUS, Level.DANGEROUS



def workspace_path(ctx: ToolContext, path: str) -> str:
    """``path`` resolved against the workspace root; refused when it leaves the root."""
    root = posixpath.normpath(ctx.config.workdir)
    resolved = posixpath.normpath(posixpath.join(root, path))
    if resolved != root and not resolved.startswith(root.rstrip("/") + "/"):
        raise ToolError(
            "outside_workspace",
            f'Path "{path}" resolves to "{resolved}" which is outside the workspace root "{root}"',
        )
    return resolved


def _dumps(value: Any) -> str:
    return shown_json(value)


def _as_json(result: ToolResult, value: Any, *, ok: bool | None = None) -> ToolResult:
    """``result`` reshaped to AgentLoop's JSON object (text = the JSON, data = the object)."""
    ok = result.ok if ok is None else ok
    error = None if ok else result.error
    return result.model_copy(update={"text": _dumps(value), "data": value, "ok": ok, "error": error})


def _error_text(result: ToolResult) -> str:
    return result.error.message if result.error else result.text


# ---- calculate, search ---------------------------------------------------------------------------


class CalculateArgs(ToolInput):
    expression: str = Field(description='Mathematical expression to evaluate, e.g. "2 + 3 * 4"')


def _present_calculate(result: ToolResult, args: CalculateArgs) -> ToolResult:
    # A plain string either way: "Result of <expression>: <result>" or the error message.
    return result if result.ok else result.model_copy(update={"text": _error_text(result)})


class SearchArgs(ToolInput):
    query: str = Field(description="Search query string")


def _present_search(result: ToolResult, args: SearchArgs) -> ToolResult:
    if not result.ok:
        failure = result.data if isinstance(result.data, dict) else {"error": _error_text(result)}
        return _as_json(result, {"error": failure.get("error"), "query": args.query, "results": []})
    return _as_json(result, result.data["results"])


# ---- code-search ---------------------------------------------------------------------------------


def union_tool(name: str, canonicals: tuple[str, ...], level: Level, snippet: str) -> Tool:
    """One profile tool served by whichever canonical tool its mapping picked (by input model)."""
    by_model: dict[type[BaseModel], Tool] = {REGISTRY[c].input_model: REGISTRY[c] for c in canonicals}

    async def handler(ctx: ToolContext, args: BaseModel) -> ToolResult:
        return await by_model[type(args)].handler(ctx, args)

    first = REGISTRY[canonicals[0]]
    return Tool(
        name=f"{NAME}:{name}",
        input_model=first.input_model,
        handler=handler,
        level=level,
        access=first.access,
        snippet=snippet,
        paths=lambda a: by_model[type(a)].paths(a),
        command=lambda a: by_model[type(a)].command(a),
    )


class CodeSearchArgs(ToolInput):
    pattern: str = Field(description="Pattern to search for")
    mode: Literal["literal", "regex", "glob"] = Field("literal", description="Matching mode")
    path: str = Field(".", description="Directory to search (relative to workspace root)")
    maxResults: int = Field(50, gt=0, description="Cap on number of results")
    contextLines: int = Field(2, ge=0, description="Lines of surrounding context to include")
    fileGlob: str | None = Field(None, description="Glob to restrict which files are searched (e.g. **/*.ts)")

    _root: str = PrivateAttr("")


def _code_search(args: CodeSearchArgs, ctx: ToolContext) -> Any:
    root = args._root = workspace_path(ctx, args.path)
    if args.mode == "glob":
        # A file-name glob as ripgrep's --glob reads it: without a slash it matches at any depth.
        pattern = args.pattern if "/" in args.pattern else "**/" + args.pattern
        return canonical_args("glob", pattern=pattern, path=root, limit=args.maxResults, sort_by="path")
    return canonical_args(
        "grep", pattern=args.pattern, path=root, literal=args.mode == "literal", output_mode="content",
        context=args.contextLines, glob=args.fileGlob, limit=args.maxResults,
    )


def _present_code_search(result: ToolResult, args: CodeSearchArgs) -> ToolResult:
    if not result.ok:
        return _as_json(result, {"matches": [], "truncated": False, "error": _error_text(result)})
    root = args._root
    if args.mode == "glob":
        matches = [
            {"file": posixpath.relpath(f, root), "line": 0, "column": 0, "content": "", "context": []}
            for f in result.data["files"]
        ]
    else:
        matches = [
            {
                "file": posixpath.relpath(m["path"], root),
                "line": m["line"],
                "column": m["column"],
                "content": m["text"],
                "context": [text for _, text in m["context_before"] + m["context_after"]],
            }
            for m in result.data["matches"]
        ]
    return _as_json(result, {"matches": matches, "truncated": len(matches) >= args.maxResults})


# ---- processes -----------------------------------------------------------------------------------


class ProcessJSON(ToolInput):
    """The `{ stdout, stderr, exitCode }` result of code_run and shell."""

    _timeout_ms: float = PrivateAttr(0.0)


def _present_process(result: ToolResult, args: ProcessJSON) -> ToolResult:
    data = result.data if isinstance(result.data, dict) else {}
    if "stdout" not in data:
        # Refused before it ran (metacharacters, blocklist, bad cwd): AgentLoop reports it in stderr.
        return _as_json(result, {"stdout": "", "stderr": _error_text(result), "exitCode": -1}, ok=False)
    stderr = data["stderr"]
    if data.get("timed_out"):
        stderr += ("\n" if stderr else "") + f"Command timed out after {args._timeout_ms:g}ms"
    code = data["exit_code"]
    return _as_json(result, {"stdout": data["stdout"], "stderr": stderr, "exitCode": -1 if code is None else code})


class CodeRunArgs(ProcessJSON):
    mode: Literal["command", "file"] = Field(description="Execution mode")
    command: str | None = Field(None, description="Command string to execute (mode=command)")
    file: str | None = Field(None, description="Absolute path to script file (mode=file)")
    interpreter: str | None = Field(None, description="Override interpreter (inferred from extension if omitted)")
    cwd: str | None = Field(None, description="Working directory (defaults to the workspace root)")
    env: dict[str, str] | None = Field(None, description="Extra environment variables")
    timeout: float | None = Field(None, gt=0, description="Timeout in ms (overrides EXECUTION_TIMEOUT_MS)")


def _code_run(args: CodeRunArgs, ctx: ToolContext) -> Any:
    canonical: dict[str, Any] = {
        "mode": args.mode,
        "command": args.command,
        "file": args.file,
        "interpreter": args.interpreter,
        "cwd": workspace_path(ctx, args.cwd or "."),
        "env": args.env,
    }
    if args.timeout is not None:
        canonical["timeout"] = args.timeout / 1000
    model = canonical_args("run_code", **canonical)
    args._timeout_ms = model.timeout * 1000
    return model


class ShellArgs(ProcessJSON):
    command: str = Field(description="Command to run (split by whitespace; no shell)")
    cwd: str | None = Field(None, description="Working directory (must be inside WORKSPACE_ROOT)")
    env: dict[str, str] | None = Field(None, description="Extra environment variables")
    timeout: float | None = Field(None, gt=0, description="Timeout in ms (overrides TOOL_TIMEOUT_MS)")


def _shell(args: ShellArgs, ctx: ToolContext) -> Any:
    canonical: dict[str, Any] = {"command": args.command, "cwd": args.cwd, "env": args.env}
    if args.timeout is not None:
        canonical["timeout"] = args.timeout / 1000
    model = canonical_args("exec", **canonical)
    args._timeout_ms = model.timeout * 1000
    return model


# ---- files ---------------------------------------------------------------------------------------

MAX_FILE_SIZE_BYTES = 10 * 1024 * 1024


class FileListArgs(ToolInput):
    path: str = Field(".", description="Directory path relative to workspace root")
    glob: str | None = Field(None, description="Glob filter (e.g. *.ts, **/*.json)")
    recursive: bool = Field(False, description="Recurse into subdirectories")


async def _file_list(ctx: ToolContext, args: FileListArgs) -> ToolResult:
    """Entries of a directory (or its whole tree), as readdir would give them; symbolic links
    are not followed into."""
    root = workspace_path(ctx, args.path)
    entries: list[dict[str, Any]] = []
    with op_errors(root):
        if args.recursive:
            walked = await ctx.client.walk(root, include_hidden=True, ignore_files=())
            found = [(e.path, e.type, e.size) for e in walked.entries]
        else:
            found = [(e.name, e.type, e.size) for e in await ctx.client.list_dir(root)]
    matcher = glob_regex(args.glob) if args.glob else None
    for path, kind, size in sorted(found):
        if kind not in ("file", "dir") and args.recursive:
            continue
        if matcher is not None and matcher.fullmatch(path) is None:
            continue
        if kind == "dir":
            entries.append({"path": path, "type": "directory"})
        else:
            entries.append({"path": path, "type": "file", "sizeBytes": size})
    return ToolResult.success(_dumps(entries), entries)


FILE_LIST = Tool(
    name="agentloop:file-list",
    input_model=FileListArgs,
    handler=_file_list,
    level=SAFE,
    access="read",
    snippet="List a directory of the workspace (glob filter, recursive)",
    paths=lambda a: [a.path],
)


class FileReadArgs(ToolInput):
    path: str = Field(description="File path relative to workspace root")
    encoding: Literal["utf-8", "base64"] | None = Field(None, description="Encoding for the returned content")


def _present_file_read(result: ToolResult, args: FileReadArgs) -> ToolResult:
    if not result.ok:
        return result
    raw = base64.b64decode(result.data["content"])
    encoding = args.encoding
    if encoding is None:
        try:
            raw.decode("utf-8")
            encoding = "utf-8"
        except UnicodeDecodeError:
            encoding = "base64"
    content = raw.decode("utf-8", "replace") if encoding == "utf-8" else result.data["content"]
    return _as_json(result, {"content": content, "encoding": encoding, "sizeBytes": len(raw)})


class FileWriteArgs(ToolInput):
    path: str = Field(description="File path relative to workspace root")
    content: str = Field(description="Content to write")
    encoding: Literal["utf-8", "base64"] = Field("utf-8", description="Encoding of the provided content")


def _file_write(args: FileWriteArgs, ctx: ToolContext) -> Any:
    if args.encoding == "base64":
        try:
            base64.b64decode(args.content, validate=True)
        except binascii.Error as exc:
            raise ToolError("invalid_arguments", f"content is not valid base64: {exc}") from None
    return canonical_args(
        "write_file", path=workspace_path(ctx, args.path), content=args.content, encoding=args.encoding,
        create_directories=True, max_bytes=MAX_FILE_SIZE_BYTES,
    )


def _present_success_path(result: ToolResult, args: Any) -> ToolResult:
    if not result.ok:
        return _success_failure(result)
    return _as_json(result, {"success": True, "path": args.path})


class FileEditArgs(ToolInput):
    path: str = Field(description="File path relative to workspace root")
    search: str | None = Field(None, description="Exact string to find (search/replace mode)")
    replace: str | None = Field(None, description="Replacement string (search/replace mode)")
    startLine: int | None = Field(None, ge=1, description="First line to replace, 1-based (line-range mode)")
    endLine: int | None = Field(None, ge=1, description="Last line to replace, 1-based, inclusive (line-range mode)")
    newContent: str | None = Field(None, description="Replacement text (line-range mode)")


def _file_edit(args: FileEditArgs, ctx: ToolContext) -> Any:
    path = workspace_path(ctx, args.path)
    if args.search is not None and args.replace is not None:
        if not args.search:
            raise ToolError("invalid_arguments", "Search string must not be empty")
        # The first occurrence, found verbatim.
        return canonical_args(
            "edit_file", path=path, old_string=args.search, new_string=args.replace, whitespace_match=False,
            on_multiple="first",
        )
    if args.startLine is not None and args.endLine is not None and args.newContent is not None:
        if args.endLine < args.startLine:
            raise ToolError(
                "invalid_range", f"Line range {args.startLine}–{args.endLine} is out of bounds (end before start)"
            )
        return canonical_args(
            "edit_file", path=path, start_line=args.startLine, end_line=args.endLine, new_string=args.newContent
        )
    raise ToolError("invalid_arguments", "Provide either (search + replace) or (startLine + endLine + newContent)")


def _present_file_edit(result: ToolResult, args: FileEditArgs) -> ToolResult:
    code = result.error.code if result.error else None
    if code == "no_change":
        # Replacing text with itself leaves the file as it was: AgentLoop reports success.
        return _as_json(result, {"success": True, "path": args.path}, ok=True)
    if code == "no_match":
        return _as_json(result, {"success": False, "error": f'Search string not found in "{args.path}"'})
    return _present_success_path(result, args)


class FileDeleteArgs(ToolInput):
    path: str = Field(description="File path relative to workspace root")


class DiffArgs(ToolInput):
    original: str = Field(description="Original text or file path (when mode=files)")
    modified: str = Field(description="Modified text or file path (when mode=files)")
    mode: Literal["strings", "files"] = Field("strings", description="Compare inline strings or workspace files")
    originalLabel: str | None = Field(None, description='Label for the original side (default: "original")')
    modifiedLabel: str | None = Field(None, description='Label for the modified side (default: "modified")')


def _diff(args: DiffArgs, ctx: ToolContext) -> Any:
    if args.mode == "files":
        return canonical_args(
            "diff", mode="files", original=workspace_path(ctx, args.original),
            modified=workspace_path(ctx, args.modified),
            original_label=args.originalLabel or args.original, modified_label=args.modifiedLabel or args.modified,
        )
    return canonical_args(
        "diff", original=args.original, modified=args.modified, original_label=args.originalLabel or "original",
        modified_label=args.modifiedLabel or "modified",
    )


def _present_diff(result: ToolResult, args: DiffArgs) -> ToolResult:
    # The unified diff itself, "" when the two sides are equal.
    return result.model_copy(update={"text": result.data["diff"]}) if result.ok else result


class PatchArgs(ToolInput):
    path: str = Field(description="File path relative to workspace root")
    patch: str = Field(description="Unified diff patch string")


def _present_patch(result: ToolResult, args: PatchArgs) -> ToolResult:
    if not result.ok:
        return _success_failure(result)
    return _as_json(result, {"success": True})


# ---- git -----------------------------------------------------------------------------------------


class GitArgs(ToolInput):
    cwd: str | None = Field(None, description="Repository path (defaults to the workspace root)")


def _repo(ctx: ToolContext, args: GitArgs) -> str:
    return workspace_path(ctx, args.cwd or ".")


def _git_failure(result: ToolResult, **empty: Any) -> ToolResult:
    return _as_json(result, {"error": _error_text(result), **empty})


def _success_failure(result: ToolResult) -> ToolResult:
    return _as_json(result, {"success": False, "error": _error_text(result)})


class GitStatusArgs(GitArgs):
    pass


def _present_git_status(result: ToolResult, args: GitStatusArgs) -> ToolResult:
    if not result.ok:
        return _git_failure(result, entries=[], isClean=False)
    entries = [{"status": e["status"], "path": e["path"]} for e in result.data["entries"]]
    return _as_json(result, {"entries": entries, "isClean": result.data["is_clean"]})


class GitLogArgs(GitArgs):
    maxCount: int = Field(20, gt=0, description="Maximum commits to return")


def _present_git_log(result: ToolResult, args: GitLogArgs) -> ToolResult:
    if not result.ok:
        return _git_failure(result, commits=[])
    keys = ("hash", "date", "message", "author_name", "author_email")
    return _as_json(result, {"commits": [{k: c[k] for k in keys} for c in result.data["commits"]]})


class GitDiffArgs(GitArgs):
    path: str | None = Field(None, description="Limit diff to this file or directory")
    staged: bool = Field(False, description="Show staged (cached) diff")


def _present_git_diff(result: ToolResult, args: GitDiffArgs) -> ToolResult:
    if not result.ok:
        return _git_failure(result, diff="")
    return _as_json(result, {"diff": result.data["diff"]})


class GitCommitArgs(GitArgs):
    message: str = Field(description="Commit message")
    files: list[str] | None = Field(None, description="Files to stage (omit to stage all changes)")


def _present_git_commit(result: ToolResult, args: GitCommitArgs) -> ToolResult:
    if not result.ok:
        return _success_failure(result)
    data = result.data
    return _as_json(result, {"success": True, "commitHash": data["short_hash"], "branch": data["branch"]})


class GitBranchArgs(GitArgs):
    action: Literal["list", "create", "delete"] = Field(description="Operation to perform")
    branch: str | None = Field(None, description="Branch name (required for create and delete)")
    startPoint: str | None = Field(
        None, description="Commit, tag, or branch to base the new branch on (create only; defaults to HEAD)"
    )
    force: bool | None = Field(None, description="Force-delete even if not fully merged (delete only)")


def _git_branch(args: GitBranchArgs, ctx: ToolContext) -> Any:
    if args.action != "list" and not args.branch:
        raise ToolError("invalid_arguments", f"'branch' is required for action '{args.action}'")
    return canonical_args(
        "git_branch",
        cwd=_repo(ctx, args),
        action=args.action,
        branch=args.branch,
        start_point=args.startPoint,
        # `force` is documented for delete only; a forced create would reset an existing branch.
        force=bool(args.force) and args.action == "delete",
    )


def _present_git_branch(result: ToolResult, args: GitBranchArgs) -> ToolResult:
    if not result.ok:
        return _success_failure(result)
    if args.action == "list":
        keys = ("name", "current", "commit")
        branches = [{k: b[k] for k in keys} for b in result.data["branches"]]
        return _as_json(result, {"success": True, "branches": branches, "current": result.data["current"]})
    return _as_json(result, {"success": True})


class GitCheckoutArgs(GitArgs):
    branch: str = Field(description="Branch name, tag, or commit hash to check out")
    newBranch: str | None = Field(None, description="When provided, creates and checks out a new branch at `branch`")


def _present_git_checkout(result: ToolResult, args: GitCheckoutArgs) -> ToolResult:
    if not result.ok:
        return _success_failure(result)
    return _as_json(result, {"success": True, "branch": args.newBranch or args.branch})


class GitPushArgs(GitArgs):
    remote: str | None = Field(None, description='Remote name (defaults to "origin")')
    branch: str | None = Field(None, description="Branch to push (defaults to the currently checked-out branch)")
    setUpstream: bool | None = Field(None, description="Set the upstream tracking reference (-u / --set-upstream)")
    force: bool | None = Field(None, description="Force push — overwrites remote history. Use with caution.")


def _present_git_push(result: ToolResult, args: GitPushArgs) -> ToolResult:
    if not result.ok:
        return _success_failure(result)
    return _as_json(result, {"success": True, "remote": result.data["remote"], "branch": result.data["branch"]})


# ---- web_fetch -----------------------------------------------------------------------------------


class WebFetchArgs(ToolInput):
    url: str = Field(description="URL of the web page to fetch")
    extractMode: Literal["readability", "raw"] = Field(
        "readability",
        description='"readability" extracts the main article content; "raw" converts the full <body> to Markdown',
    )


def _present_web_fetch(result: ToolResult, args: WebFetchArgs) -> ToolResult:
    if not result.ok:
        data = result.data if isinstance(result.data, dict) else {}
        return _as_json(result, {"error": data.get("error", _error_text(result)), "url": data.get("url", args.url)})
    d = result.data
    page: dict[str, Any] = {"url": d["url"], "title": d["title"], "markdown": d["markdown"]}
    page.update({k: d[k] for k in ("byline", "excerpt") if d.get(k)})
    page.update({"originalLength": d["original_length"], "truncated": d["truncated"]})
    return _as_json(result, page)


# ---- plan, run, plan-and-run (host hooks) --------------------------------------------------------

StepFailure = Literal["retry", "skip", "abort"]


class PlanArgs(ToolInput):
    goal: str = Field(description="High-level goal to decompose into an actionable plan")


class RunArgs(ToolInput):
    plan: dict[str, Any] = Field(description="Plan object returned by the plan tool ({ steps: [...] })")
    onStepFailure: StepFailure | None = Field(None, description='Strategy when a step fails (defaults to "retry")')


class PlanAndRunArgs(ToolInput):
    goal: str = Field(description="High-level goal to plan and execute")
    onStepFailure: StepFailure | None = Field(None, description='Strategy when a step fails (defaults to "retry")')


def _present_plan(result: ToolResult, args: PlanArgs) -> ToolResult:
    if not result.ok or isinstance(result.data, str):
        return result
    return _as_json(result, result.data)


def _present_text(result: ToolResult, args: ToolInput) -> ToolResult:
    if not result.ok or isinstance(result.data, str):
        return result
    return result.model_copy(update={"text": _dumps(result.data)})


# ---- the profile ---------------------------------------------------------------------------------


def build() -> Profile:
    profile = Profile(name=NAME, description="Seed 004: AgentLoop tools with safe / cautious / dangerous levels")

    def add(name: str, canonical: str | Tool, model: type[ToolInput], level: Level, snippet: str, **kw: Any) -> None:
        tool = REGISTRY[canonical] if isinstance(canonical, str) else canonical
        profile.add(
            ProfileTool(name=name, canonical=tool, input_model=model, level=level, level_is_floor=True, snippet=snippet,
                        description=snippet, **kw)
        )

    def hook(name: str, model: type[ToolInput], level: Level, snippet: str, present: Any) -> None:
        add(name, hook_tool(NAME, name, model, level=level, snippet=snippet), model, level, snippet, present=present)

    add("calculate", "calculate", CalculateArgs, SAFE,
        "Evaluate a mathematical expression safely (no eval)",
        to_canonical=lambda a, s: canonical_args("calculate", expression=a.expression), present=_present_calculate)
    add("search", "web_search", SearchArgs, SAFE,
        "Search the web; returns a JSON array of results with title, link and snippet",
        to_canonical=lambda a, s: canonical_args("web_search", query=a.query), present=_present_search)
    add("code-search", union_tool("code-search", ("grep", "glob"), SAFE, "Search the workspace"), CodeSearchArgs,
        SAFE, "Search the workspace for a literal string, a regular expression, or a file-name glob",
        to_canonical=_code_search, present=_present_code_search)
    add("code_run", "run_code", CodeRunArgs, DANGEROUS,
        "Execute a command or a script file in a subprocess; returns { stdout, stderr, exitCode }",
        to_canonical=_code_run, present=_present_process)
    add("shell", "exec", ShellArgs, DANGEROUS,
        "Run one executable with arguments (execFile, no shell; metacharacters rejected); "
        "returns { stdout, stderr, exitCode }",
        to_canonical=_shell, present=_present_process,
        guidelines=("shell runs one program without a shell: no pipes, &&, ; or $(...); use code_run for scripts.",))
    add("file-list", FILE_LIST, FileListArgs, SAFE,
        "List a directory of the workspace (optional glob filter, recursive)")
    add("file-read", "read_file", FileReadArgs, SAFE,
        "Read a workspace file; binary files come back base64-encoded",
        guidelines=("File paths are relative to the workspace root and cannot leave it.",),
        to_canonical=lambda a, s: canonical_args(
            "read_file", path=workspace_path(s, a.path), encoding="base64", images=False, directory="error",
            max_file_bytes=MAX_FILE_SIZE_BYTES,
        ),
        present=_present_file_read)
    add("file-write", "write_file", FileWriteArgs, CAUTIOUS,
        "Create or overwrite a workspace file (parent directories are created)",
        to_canonical=_file_write, present=_present_success_path)
    add("file-edit", "edit_file", FileEditArgs, CAUTIOUS,
        "Edit a workspace file: search/replace of the first occurrence, or replace a line range",
        to_canonical=_file_edit, present=_present_file_edit)
    add("file-delete", "delete_file", FileDeleteArgs, DANGEROUS,
        "Delete a workspace file (irreversible)",
        to_canonical=lambda a, s: canonical_args("delete_file", path=workspace_path(s, a.path)),
        present=_present_success_path)
    add("diff", "diff", DiffArgs, SAFE,
        "Unified diff between two strings or two workspace files",
        to_canonical=_diff, present=_present_diff)
    add("patch", "apply_patch", PatchArgs, CAUTIOUS,
        "Apply a unified diff patch to a workspace file",
        to_canonical=lambda a, s: canonical_args("apply_patch", path=workspace_path(s, a.path), patch=a.patch),
        present=_present_patch)
    add("git-status", "git_status", GitStatusArgs, SAFE,
        "Working-tree status of a Git repository (git status --porcelain)",
        to_canonical=lambda a, s: canonical_args("git_status", cwd=_repo(s, a)), present=_present_git_status)
    add("git-log", "git_log", GitLogArgs, SAFE,
        "Recent commit history (git log)",
        to_canonical=lambda a, s: canonical_args("git_log", cwd=_repo(s, a), max_count=a.maxCount),
        present=_present_git_log)
    add("git-diff", "git_diff", GitDiffArgs, SAFE,
        "The diff of a repository (git diff [--cached] [-- <path>])",
        to_canonical=lambda a, s: canonical_args("git_diff", cwd=_repo(s, a), path=a.path, staged=a.staged),
        present=_present_git_diff)
    add("git-commit", "git_commit", GitCommitArgs, CAUTIOUS,
        "Stage files (default: all changes) and create a Git commit",
        to_canonical=lambda a, s: canonical_args("git_commit", cwd=_repo(s, a), message=a.message, files=a.files or None),
        present=_present_git_commit)
    add("git-branch", "git_branch", GitBranchArgs, CAUTIOUS,
        "List, create or delete Git branches",
        to_canonical=_git_branch, present=_present_git_branch)
    add("git-checkout", "git_checkout", GitCheckoutArgs, CAUTIOUS,
        "Switch to a branch, tag or commit (optionally creating a new branch there)",
        to_canonical=lambda a, s: canonical_args("git_checkout", cwd=_repo(s, a), branch=a.branch, new_branch=a.newBranch),
        present=_present_git_checkout)
    add("git-push", "git_push", GitPushArgs, DANGEROUS,
        "Push the current (or given) branch to a remote",
        to_canonical=lambda a, s: canonical_args(
            "git_push", cwd=_repo(s, a), remote=a.remote or "origin", branch=a.branch,
            set_upstream=bool(a.setUpstream), force=bool(a.force),
        ),
        present=_present_git_push)
    hook("plan", PlanArgs, SAFE,
         "Decompose a high-level goal into a step-by-step plan (planner subagent)", _present_plan)
    hook("run", RunArgs, DANGEROUS,
         "Execute a plan produced by the plan tool, one subagent per step", _present_text)
    hook("plan-and-run", PlanAndRunArgs, DANGEROUS,
         "Plan a goal and execute the plan in one call", _present_text)
    add("web_fetch", "web_fetch", WebFetchArgs, CAUTIOUS,
        "Fetch a public web page and return its main content as Markdown",
        to_canonical=lambda a, s: canonical_args("web_fetch", url=a.url, extract_mode=a.extractMode),
        present=_present_web_fetch)
    return profile
