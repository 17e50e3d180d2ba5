"""The `amp` profile: seed 001 (Amp's core tools) served exactly as written.

Every result is Amp's envelope: ``{"status": "done", "result": ...}`` (plus ``trackFiles``
for file changes) or ``{"status": "error", "error": {...}}``; it is the result's ``data``,
and ``text`` is the result itself when that is a string, else its JSON.

Where Amp differs from the canonical tools: Bash does not keep ``cd`` or exported variables
between calls (an Amp session runs bash in the stateless mode), runs one call at a time,
strips a trailing ``&``, turns ``cd dir && cmd`` into ``cwd: dir``, combines stdout and
stderr, keeps the last 50,000 characters and answers in XML; create_file appends a final
newline and reports AGENTS.md files it discovers; Read numbers lines ``N: text``, reads
[1, 500] by default, never more than 2,000 lines, and refuses files over 64 KB; Grep is
case-insensitive by default, at most 10 matches per file and 100 in all. finder, oracle,
Task, librarian and kraken need a language model and Check needs the project's own check
commands: host hooks serve them.
"""

from __future__ import annotations

import dataclasses
import posixpath
import shlex
from typing import TYPE_CHECKING, Any

import anyio
from pydantic import BaseModel, Field, PrivateAttr

from caisson.errors import OpError
from caisson.policy import Level
from caisson.policy.paths import is_secret
from caisson.profiles.base import Profile, ProfileTool, canonical_args
from caisson.profiles.hooks import hook_tool
from caisson.tools.base import REGISTRY, Tool, ToolErrorInfo, ToolInput, ToolResult
from caisson.tools.text import shown_json, shown_name

if TYPE_CHECKING:
    from caisson.tools.context import ToolContext

NAME = "amp"
MAX_FILE_SIZE = 65_536
DEFAULT_RANGE = (1, 500)
MAX_BYTES_PER_LINE = 4_096
MAX_READ_LINES = 2_000
MAX_OUTPUT_CHARS = 50_000
BASH_CAPTURE = 8 * 1024 * 1024
GREP_PER_FILE = 10
GREP_TOTAL = 100
GREP_LINE = 200
NO_RESULTS = [
    "No results found.",
    "If you meant to search for a literal string, run Grep again with literal:true.",
]
GUIDANCE_FILE = "AGENTS.md"
SECRET_MESSAGE = "Refusing to read env file. Reading secrets is not permitted."



def done(result: ToolResult, value: Any, **extra: Any) -> ToolResult:
    envelope = {"status": "done", "result": value, **extra}
    text = value if isinstance(value, str) else shown_json(value)
    return result.model_copy(update={"ok": True, "error": None, "text": text, "data": envelope})


def error(result: ToolResult, message: str, **fields: Any) -> ToolResult:
    code = result.error.code if result.error else "error"
    envelope = {"status": "error", "error": {**fields, "message": message}}
    return result.model_copy(
        update={"ok": False, "text": message, "data": envelope, "error": ToolErrorInfo(code=code, message=message)}
    )


def _code(result: ToolResult) -> str | None:
    return result.error.code if result.error else None


def _message(result: ToolResult) -> str:
    return result.error.message if result.error else result.text


async def home_dir(ctx: ToolContext) -> str:
    """The agent user's home directory (for ``~``), from the container's /etc/passwd: a read,
    not a process, since this runs before the permission policy has decided the call."""
    cache: dict[str, str] = ctx.tool_state("amp.home", dict)
    if "home" not in cache:
        cache["home"] = "/"
        try:
            passwd = (await ctx.client.read_file("/etc/passwd", 0, 1024 * 1024)).decode("utf-8", "replace")
        except OpError:
            passwd = ""
        for line in passwd.splitlines():
            fields = line.split(":")
            if len(fields) >= 6 and fields[0] == ctx.config.agent_user and fields[5].startswith("/"):
                cache["home"] = fields[5]
    return cache["home"]


async def expand(ctx: ToolContext, path: str) -> str:
    if path == "~" or path.startswith("~/"):
        return (await home_dir(ctx)) + path[1:]
    return path


# ---- Read ----------------------------------------------------------------------------------------


class ReadArgs(ToolInput):
    path: str = Field(description="The absolute path to the file or directory (MUST be absolute, not relative).")
    read_range: list[float] | None = Field(
        None, min_length=2, max_length=2,
        description="Line range [start, end], 1-indexed. Default: [1, 500]. Hard cap: 2,000 lines.",
    )

    _path: str = PrivateAttr("")


async def _read(args: ReadArgs, ctx: ToolContext) -> Any:
    path = ctx.resolve(await expand(ctx, args.path))
    args._path = path
    start, end = (int(v) for v in (args.read_range or DEFAULT_RANGE))
    start = max(1, start)
    end = min(max(start, end), start + MAX_READ_LINES - 1)
    return canonical_args(
        "read_file", path=path, start_line=start, end_line=end, line_numbers=False,
        max_line_chars=MAX_BYTES_PER_LINE, max_output_bytes=4 * MAX_FILE_SIZE, max_file_bytes=MAX_FILE_SIZE,
        encoding="text", images=True, directory="list",
    )


def _present_read(result: ToolResult, args: ReadArgs) -> ToolResult:
    code = _code(result)
    # The permission policy refuses secret files before the tool runs; either way Amp's error.
    if code == "permission_denied" and is_secret(args._path):
        return error(result, SECRET_MESSAGE, errorCode="reading-secret-file")
    if code == "not_found":
        return error(result, f"ENOENT: no such file or directory '{args._path}'", absolutePath=args._path)
    if code == "binary_file":
        return error(result, "File appears to be binary and cannot be displayed as text.")
    if not result.ok:
        return error(result, _message(result))
    data = result.data
    if data.get("type") == "image":
        return done(result, {"type": "image", "media_type": data["media_type"], "data": data["data"]})
    if data.get("type") == "directory":
        return done(result, result.text)
    lines = result.text.split("\n") if data["lines"] else []
    first = data["start_line"]
    return done(result, "\n".join(f"{first + i}: {line.rstrip()}" for i, line in enumerate(lines)))


# ---- edit_file, create_file, undo_edit, delete_file ----------------------------------------------


class EditFileArgs(ToolInput):
    path: str = Field(description="Absolute path to the file (MUST exist)")
    old_str: str = Field(description="Text to search for. Must match exactly.")
    new_str: str = Field(description="Text to replace old_str with.")
    replace_all: bool = Field(False, description="Replace all occurrences of old_str")


async def _edit(args: EditFileArgs, ctx: ToolContext) -> Any:
    return canonical_args(
        "edit_file", path=await expand(ctx, args.path), old_string=args.old_str, new_string=args.new_str,
        replace_all=args.replace_all, whitespace_match=True, fuzzy_match=False, on_multiple="error",
    )


def _changed(result: ToolResult) -> ToolResult:
    data = result.data
    return done(result, {"diff": data["diff"], "lineRange": data["line_range"]}, trackFiles=[data["path"]])


def _present_edit(result: ToolResult, args: EditFileArgs) -> ToolResult:
    code = _code(result)
    if code == "not_found":
        return error(result, "file not found. Cannot update a file that doesn't exist.")
    if code == "no_change":
        return error(result, "old_str and new_str must be different")
    if code == "no_match":
        return error(result, "Could not find exact match for old_str")
    if code == "multiple_matches":
        count = (result.data or {}).get("matches", "several")
        return error(
            result, f"found multiple matches for edit ({count} occurrences). Use replace_all or provide more context."
        )
    return _changed(result) if result.ok else error(result, _message(result))


class CreateFileArgs(ToolInput):
    path: str = Field(description="Absolute path of file to create. If exists, will be overwritten.")
    content: str = Field(description="The content for the file.")

    _discovered: list[str] = PrivateAttr(default_factory=list)
    _seen: set[str] = PrivateAttr(default_factory=set)


async def _create(args: CreateFileArgs, ctx: ToolContext) -> Any:
    path = ctx.resolve(await expand(ctx, args.path))
    args._seen = ctx.tool_state("amp.guidance", set)
    args._discovered = await _guidance_files(ctx, path, args._seen)
    return canonical_args(
        "write_file", path=path, content=args.content, ensure_trailing_newline=True, create_directories=True
    )


async def _guidance_files(ctx: ToolContext, path: str, seen: set[str]) -> list[str]:
    """AGENTS.md files in the directories from the workspace root down to ``path`` that this
    session has not reported yet (the root's own one is part of the agent's prompt already)."""
    root = posixpath.normpath(ctx.config.workdir)
    directory = posixpath.dirname(path)
    found: list[str] = []
    while directory.startswith(root.rstrip("/") + "/"):
        candidate = posixpath.join(directory, GUIDANCE_FILE)
        if candidate not in seen and candidate != path and (await ctx.client.stat(candidate)).exists:
            found.append(candidate)
        directory = posixpath.dirname(directory)
    return found[::-1]


def _present_create(result: ToolResult, args: CreateFileArgs) -> ToolResult:
    if not result.ok:
        return error(result, _message(result))
    path = result.data["path"]
    message = f"Successfully {'created' if result.data['created'] else 'overwrote'} file {path}"
    if args._discovered:
        args._seen.update(args._discovered)
        return done(result, {"message": message, "discoveredGuidanceFiles": args._discovered}, trackFiles=[path])
    return done(result, message, trackFiles=[path])


class PathArgs(ToolInput):
    path: str = Field(description="Absolute path to the file")


def _present_undo(result: ToolResult, args: PathArgs) -> ToolResult:
    return _changed(result) if result.ok else error(result, _message(result))


def _present_delete(result: ToolResult, args: PathArgs) -> ToolResult:
    if not result.ok:
        return error(result, _message(result))
    return done(result, f"Successfully deleted file {result.data['path']}", trackFiles=[result.data["path"]])


# ---- Bash ----------------------------------------------------------------------------------------


class BashArgs(ToolInput):
    cmd: str = Field(description="The shell command to execute")
    cwd: str | None = Field(None, description="Working directory (absolute path)")

    _cmd: str = PrivateAttr("")
    _cwd: str = PrivateAttr("")


async def _bash(args: BashArgs, ctx: ToolContext) -> Any:
    cmd = args.cmd.rstrip("&").strip()
    cwd = ctx.resolve(await expand(ctx, args.cwd)) if args.cwd else ctx.config.workdir
    if cmd.startswith("cd ") and "&&" in cmd:
        cd_part, rest = cmd.split("&&", 1)
        cwd = posixpath.normpath(posixpath.join(cwd, await expand(ctx, cd_part[3:].strip())))
        cmd = rest.strip()
    args._cmd, args._cwd = cmd, cwd
    canonical = canonical_args(
        # Amp's Bash starts every call afresh: neither cd nor exported variables carry over.
        "bash", command=cmd, working_dir=cwd, stdout_max=BASH_CAPTURE, stderr_max=BASH_CAPTURE, stateless=True,
    )
    # Amp's Bash has no timeout: a command may run as long as the session lives (past the
    # canonical tool's 600 s cap, which an agent's own timeout argument is held to).
    canonical.timeout = ctx.config.ttl
    return canonical


def serial(tool: Tool) -> Tool:
    """``tool`` with the calls of one session run one at a time (Amp's Bash "runs serially")."""

    async def handler(ctx: ToolContext, args: BaseModel) -> ToolResult:
        async with ctx.tool_state("amp.bash.lock", anyio.Lock):
            return await tool.handler(ctx, args)

    return dataclasses.replace(tool, handler=handler)


def _present_bash(result: ToolResult, args: BashArgs) -> ToolResult:
    data = result.data if isinstance(result.data, dict) else None
    if data is None or "stdout" not in data or data.get("timed_out"):
        return error(result, _message(result))
    output = (data["stdout"] + data["stderr"])[-MAX_OUTPUT_CHARS:]
    code = data["exit_code"] if data["exit_code"] is not None else 128 + (data["signal"] or 0)
    # Non-zero exit codes are information, not errors.
    return done(
        result,
        f"<command>{args._cmd}</command>\n<working_directory>{args._cwd}</working_directory>\n"
        f"<output>{output}</output>\n<exit_code>{code}</exit_code>",
    )


# ---- glob, Grep ----------------------------------------------------------------------------------


class GlobArgs(ToolInput):
    filePattern: str = Field(description='Glob pattern like "**/*.js" or "src/**/*.ts"')
    limit: float | None = Field(None, ge=1, description="Maximum results to return")
    offset: float | None = Field(None, ge=0, description="Results to skip (pagination)")


def _present_glob(result: ToolResult, args: GlobArgs) -> ToolResult:
    if not result.ok:
        return error(result, _message(result))
    return done(result, {"files": result.data["files"], "remaining": result.data["remaining"]})


class GrepArgs(ToolInput):
    pattern: str = Field(description="Regex pattern to search for")
    path: str | None = Field(None, description="File or directory path. Cannot use with glob.")
    glob: str | None = Field(None, description="Glob pattern for files. Cannot use with path.")
    caseSensitive: bool | None = Field(None, description="Case-sensitive search (default: false)")
    literal: bool | None = Field(None, description="Treat pattern as literal string, not regex")

    _base: str = PrivateAttr("")


async def _grep(args: GrepArgs, ctx: ToolContext) -> Any:
    path = await expand(ctx, args.path) if args.path else None
    # ripgrep prints paths as it was given them: relative to the working directory unless absolute.
    args._base = "" if path and path.startswith("/") else ctx.resolve(".")
    return canonical_args(
        "grep", pattern=args.pattern, path=path, glob=args.glob, ignore_case=not args.caseSensitive,
        literal=bool(args.literal), output_mode="content", max_per_file=GREP_PER_FILE, limit=GREP_TOTAL,
    )


def _present_grep(result: ToolResult, args: GrepArgs) -> ToolResult:
    if not result.ok:
        return error(result, "ripgrep exited with code 2", detail=_message(result))
    matches = result.data.get("matches") or []
    if not matches:
        return done(result, NO_RESULTS)
    lines = []
    for m in matches[:GREP_TOTAL]:
        path = posixpath.relpath(m["path"], args._base) if args._base else m["path"]
        line = f"{shown_name(path)}:{m['line']}: {m['text']}"
        lines.append(line[:GREP_LINE] + "..." if len(line) > GREP_LINE else line)
    return done(result, lines)


# ---- format_file ---------------------------------------------------------------------------------

# Formatters by extension, tried in order; the first one installed in the image is used.
FORMATTERS: dict[tuple[str, ...], tuple[str, ...]] = {
    (".py", ".pyi"): ("ruff format -q", "black -q"),
    (".js", ".jsx", ".mjs", ".cjs", ".ts", ".tsx", ".json", ".css", ".scss", ".less", ".html", ".vue",
     ".md", ".yaml", ".yml"): ("prettier --write --log-level silent",),
    (".go",): ("gofmt -w",),
    (".rs",): ("rustfmt",),
    (".c", ".h", ".cc", ".cpp", ".hpp", ".cxx"): ("clang-format -i",),
    (".sh", ".bash"): ("shfmt -w",),
    (".rb",): ("rubocop -a --format quiet",),
    (".java",): ("google-java-format -i",),
    (".tf",): ("terraform fmt",),
}
# Prints a unified diff of what the formatter changed. Exit 3: no formatter is installed;
# 4: the file cannot be read; 2: the formatter failed (its messages are on stderr).
_FORMAT_SCRIPT = r"""f=$1; shift
before=$(mktemp) || exit 4
cp -- "$f" "$before" || { rm -f "$before"; exit 4; }
for fmt in "$@"; do
  command -v "${fmt%% *}" >/dev/null 2>&1 || continue
  $fmt "$f" >&2 || { rm -f "$before"; exit 2; }
  diff -u --label "a/$f" --label "b/$f" "$before" "$f"
  rm -f "$before"; exit 0
done
rm -f "$before"; exit 3
"""


class FormatFileArgs(ToolInput):
    path: str = Field(description="Absolute path to the file to format")


async def _format(args: FormatFileArgs, ctx: ToolContext) -> Any:
    path = ctx.resolve(await expand(ctx, args.path))
    ext = posixpath.splitext(path)[1].lower()
    formatters = next((f for exts, f in FORMATTERS.items() if ext in exts), ())
    command = "bash -c " + shlex.quote(_FORMAT_SCRIPT) + " format " + shlex.join([path, *formatters])
    return canonical_args("bash", command=command, working_dir=posixpath.dirname(path), timeout=120, stateless=True)


def _present_format(result: ToolResult, args: FormatFileArgs) -> ToolResult:
    data = result.data if isinstance(result.data, dict) else None
    if data is None or "stdout" not in data:
        return error(result, _message(result))
    if data["exit_code"] == 3:
        return error(result, f"No formatter available for {posixpath.basename(args.path)}")
    if data["exit_code"] != 0:
        return error(result, data["stderr"].strip() or f"formatting failed (exit code {data['exit_code']})")
    return done(result, {"diff": data["stdout"]}, trackFiles=[args.path])


# ---- web -----------------------------------------------------------------------------------------


class WebSearchArgs(ToolInput):
    query: str = Field(description="The search query")
    num_results: int | None = Field(None, ge=1, le=50, description="Number of results to return (default: 5)")


def _present_web_search(result: ToolResult, args: WebSearchArgs) -> ToolResult:
    if not result.ok:
        return error(result, _message(result))
    return done(result, result.data["results"])


class ReadWebPageArgs(ToolInput):
    url: str = Field(description="The URL of the web page to read")
    raw: bool | None = Field(None, description="Return the whole page converted to Markdown, not only its main content")


def _present_read_web_page(result: ToolResult, args: ReadWebPageArgs) -> ToolResult:
    if not result.ok:
        return error(result, _message(result))
    return done(result, result.data["markdown"])


# ---- tools served by host hooks ------------------------------------------------------------------


class FinderArgs(ToolInput):
    query: str = Field(description="What to find in the codebase, in plain language")


class OracleArgs(ToolInput):
    task: str = Field(description="The question or task for the oracle")
    context: str | None = Field(None, description="Background the oracle needs")
    files: list[str] | None = Field(None, description="Files the oracle should read")


class TaskArgs(ToolInput):
    prompt: str = Field(description="The task for the sub-agent, with everything it needs to know")
    description: str = Field(description="A short description of the task")


class LibrarianArgs(ToolInput):
    query: str = Field(description="What to look up across repositories")
    context: str | None = Field(None, description="Background for the search")


class KrakenArgs(ToolInput):
    task: str = Field(description="The multi-file refactoring to perform")


class CheckArgs(ToolInput):
    pass


def _present_hook(result: ToolResult, args: ToolInput) -> ToolResult:
    return done(result, result.data) if result.ok else error(result, _message(result))


# ---- the profile ---------------------------------------------------------------------------------


def build() -> Profile:
    profile = Profile(name=NAME, description="Seed 001: Amp's core tools")

    def add(name: str, canonical: str | Tool, model: type[ToolInput], snippet: str, **kw: Any) -> None:
        tool = REGISTRY[canonical] if isinstance(canonical, str) else canonical
        profile.add(ProfileTool(name=name, canonical=tool, input_model=model, snippet=snippet,
                                description=kw.pop("description", snippet), **kw))

    def hook(name: str, model: type[ToolInput], level: Level, snippet: str, what: str = "a language model") -> None:
        tool = hook_tool(NAME, name, model, level=level, snippet=snippet, what=what)
        add(name, tool, model, snippet, level=level, present=_present_hook)

    add("Read", "read_file", ReadArgs,
        "Read a file (line-numbered) or list a directory; images come back as base64",
        to_canonical=_read, present=_present_read)
    add("edit_file", "edit_file", EditFileArgs,
        "Make targeted text replacements in an existing file; returns a git-style diff",
        to_canonical=_edit, present=_present_edit, aliases=("Edit",))
    add("create_file", "write_file", CreateFileArgs,
        "Create a new file or overwrite an existing one",
        to_canonical=_create, present=_present_create, aliases=("Write",))
    add("Bash", serial(REGISTRY["bash"]), BashArgs,
        "Execute a shell command (no state between calls: use cwd instead of cd)",
        to_canonical=_bash, present=_present_bash,
        guidelines=("Bash keeps no state between calls: pass cwd instead of running cd, and do not start "
                    "background processes (a trailing & is removed).",))
    add("glob", "glob", GlobArgs,
        "Find files by name pattern (respects .gitignore; paginated)",
        to_canonical=lambda a, s: canonical_args(
            "glob", pattern=a.filePattern, limit=int(a.limit or 1000), offset=int(a.offset or 0)
        ),
        present=_present_glob)
    add("Grep", "grep", GrepArgs,
        "Search file contents (case-insensitive by default; literal mode available)",
        to_canonical=_grep, present=_present_grep)
    add("undo_edit", "undo_edit", PathArgs,
        "Revert the last edit made to a file",
        to_canonical=lambda a, s: canonical_args("undo_edit", path=a.path), present=_present_undo)
    add("delete_file", "delete_file", PathArgs,
        "Delete a file",
        to_canonical=lambda a, s: canonical_args("delete_file", path=a.path), present=_present_delete)
    add("format_file", "bash", FormatFileArgs,
        "Format a file with the formatter for its language; returns the diff",
        to_canonical=_format, present=_present_format, level=Level.CAUTIOUS)
    add("web_search", "web_search", WebSearchArgs,
        "Search the web",
        to_canonical=lambda a, s: canonical_args("web_search", query=a.query, max_results=a.num_results or 5),
        present=_present_web_search)
    add("read_web_page", "web_fetch", ReadWebPageArgs,
        "Fetch a web page and return its content as Markdown",
        to_canonical=lambda a, s: canonical_args("web_fetch", url=a.url, extract_mode="raw" if a.raw else "readability"),
        present=_present_read_web_page)
    hook("finder", FinderArgs, Level.SAFE, "Semantic code search by a sub-agent")
    hook("oracle", OracleArgs, Level.SAFE, "Deep reasoning by a stronger model")
    hook("Task", TaskArgs, Level.CAUTIOUS, "Spawn an independent sub-agent for a subtask")
    hook("librarian", LibrarianArgs, Level.SAFE, "Multi-repository search by a sub-agent")
    hook("kraken", KrakenArgs, Level.CAUTIOUS, "Multi-file refactoring by a sub-agent")
    hook("Check", CheckArgs, Level.CAUTIOUS, "Run the project's CI checks (typechecker, linter, tests)",
         what="the project's own check commands")
    return profile
