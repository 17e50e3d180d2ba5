"""The `aar` profile: seed 003 ("Aar" built-in tools) served exactly as written.

Each tool has the seed's prompt_snippet and prompt_guidelines, so ``prompt_text`` (export.py)
prints the "Available tools:" / "Guidelines:" section seed 003 shows. Side effects map onto
levels: READ is safe, WRITE cautious, EXECUTE dangerous. Paths are relative to the working
directory (or absolute). read_file returns a 50-line preview and the line count for files
over 500 lines read without a range. grep uses Python regular expressions, walks the working
directory itself (no .gitignore), skips the seed's directories, hidden directories and files
over 2 MB; find_files matches its glob at any depth like ``Path.rglob`` and skips the same
directories.
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, PrivateAttr

from caisson.policy import Level
from caisson.profiles.base import Profile, ProfileTool, canonical_args
from caisson.tools.base import REGISTRY, Tool, ToolError, ToolErrorInfo, ToolInput, ToolResult
from caisson.tools.text import glob_regex, op_errors, shown_name

if TYPE_CHECKING:
    from caisson.client.models import GrepResult
    from caisson.tools.context import ToolContext

NAME = "aar"
SKIP_DIRS = frozenset(
    {".git", ".hg", ".svn", "__pycache__", "node_modules", ".venv", "venv", ".tox", ".mypy_cache", ".ruff_cache",
     ".pytest_cache", "dist", "build", ".eggs"}
)
SKIP_DIR_GLOBS = ("*.egg-info",)
MAX_GREP_FILE = 2_000_000
LARGE_FILE_LINES = 500
PREVIEW_LINES = 50
MAX_OUTPUT_CHARS = 50_000
UNLIMITED = 1_000_000_000
GREP_TIMEOUT = 120.0



def _text(result: ToolResult, text: str) -> ToolResult:
    return result.model_copy(update={"text": text})


def _fail(result: ToolResult, message: str) -> ToolResult:
    code = result.error.code if result.error else "error"
    return result.model_copy(update={"ok": False, "text": message, "error": ToolErrorInfo(code=code, message=message)})


def _code(result: ToolResult) -> str | None:
    return result.error.code if result.error else None


def skipped_dir(name: str) -> bool:
    return name in SKIP_DIRS or name.startswith(".") or any(fnmatch.fnmatch(name, p) for p in SKIP_DIR_GLOBS)


def numbered(lines: list[str], first: int) -> str:
    return "\n".join(f"{n:>6}\t{line}" for n, line in enumerate(lines, first))


# ---- read_file, write_file, edit_file, list_directory --------------------------------------------


class ReadFileArgs(ToolInput):
    path: str = Field(description="File path (relative or absolute)")
    start_line: int = Field(
        0, ge=0, description="First line to return (1-based, inclusive). 0 = start of file."
    )
    end_line: int = Field(0, ge=0, description="Last line to return (1-based, inclusive). 0 = end of file.")


def _read(args: ReadFileArgs, ctx: ToolContext) -> Any:
    if args.end_line and args.start_line > args.end_line:
        raise ToolError("invalid_range", f"start_line ({args.start_line}) is after end_line ({args.end_line})")
    return canonical_args(
        "read_file", path=args.path, start_line=args.start_line or 1, end_line=args.end_line or None, limit=UNLIMITED,
        line_numbers=False, max_line_chars=UNLIMITED, max_output_bytes=MAX_OUTPUT_CHARS, encoding="text",
        images=False, directory="error",
    )


def _present_read(result: ToolResult, args: ReadFileArgs) -> ToolResult:
    if not result.ok:
        return result
    data = result.data
    lines = result.text.split("\n") if data["lines"] else []
    total = data["total_lines"]
    ranged = bool(args.start_line or args.end_line)
    if not ranged and total is not None and total > LARGE_FILE_LINES:
        return _text(
            result,
            f"{data['path']} has {total} lines; showing the first {PREVIEW_LINES} as a preview. "
            "Use start_line and end_line to read the section you need.\n\n"
            + numbered(lines[:PREVIEW_LINES], 1),
        )
    text = numbered(lines, data["start_line"])
    if data["has_more"] and (not args.end_line or data["end_line"] < args.end_line):
        text += (
            f"\n\n(Output truncated at {MAX_OUTPUT_CHARS} characters. "
            f"Continue with start_line={data['end_line'] + 1}.)"
        )
    return _text(result, text)


class WriteFileArgs(ToolInput):
    path: str = Field(description="File path to write to")
    content: str = Field(description="Content to write")


def _present_write(result: ToolResult, args: WriteFileArgs) -> ToolResult:
    if not result.ok:
        return result
    return _text(result, f"Wrote {result.data['bytes']} bytes to {result.data['path']}")


class EditFileArgs(ToolInput):
    path: str = Field(description="File path to edit")
    old_string: str = Field(description="Exact string to find (must be unique)")
    new_string: str = Field(description="Replacement string")

    _path: str = PrivateAttr("")


def _edit(args: EditFileArgs, ctx: ToolContext) -> Any:
    args._path = ctx.resolve(args.path)
    return canonical_args(
        "edit_file", path=args._path, old_string=args.old_string, new_string=args.new_string,
        whitespace_match=False, fuzzy_match=False, on_multiple="error",
    )


def _present_edit(result: ToolResult, args: EditFileArgs) -> ToolResult:
    code = _code(result)
    if code == "no_match":
        return _fail(result, f"old_string not found in {args._path}")
    if code == "multiple_matches":
        count = (result.data or {}).get("matches")
        return _fail(result, f"old_string found {count} times in {args._path} — must be unique")
    if not result.ok:
        return result
    return _text(result, f"Edited {args._path}: replaced 1 occurrence")


class ListDirectoryArgs(ToolInput):
    path: str = Field(".", description="Directory path")

    _path: str = PrivateAttr("")


def _list(args: ListDirectoryArgs, ctx: ToolContext) -> Any:
    args._path = ctx.resolve(args.path)
    return canonical_args("ls", path=args._path, include_hidden=True, limit=UNLIMITED)


def _present_list(result: ToolResult, args: ListDirectoryArgs) -> ToolResult:
    if _code(result) in ("not_found", "not_a_directory"):
        return _fail(result, f"Not a directory: {args._path}")
    if not result.ok:
        return result
    lines = [
        f"d {shown_name(e['name'])}" if e["type"] == "dir" else f"f {shown_name(e['name'])}  ({e['size']} bytes)"
        for e in result.data["entries"]
    ]
    body = "\n".join(lines) if lines else "(empty directory)"
    return _text(result, f"Contents of {args._path}:\n\n{body}")


# ---- bash ----------------------------------------------------------------------------------------


class BashArgs(ToolInput):
    command: str = Field(description="Shell command to execute")
    timeout: int = Field(120, ge=1, description="Timeout in seconds")


def _present_bash(result: ToolResult, args: BashArgs) -> ToolResult:
    data = result.data if isinstance(result.data, dict) else None
    if data is None or "stdout" not in data:
        return result
    if data.get("timed_out"):
        return _fail(result, f"Error: command timed out after {args.timeout}s")
    parts = []
    if data["stdout"]:
        parts.append(data["stdout"])
    if data["stderr"]:
        parts.append(f"STDERR:\n{data['stderr']}")
    if data["stdout_truncated"] or data["stderr_truncated"]:
        parts.append("[Output truncated due to size limit]")
    if data["exit_code"] != 0:
        parts.append(f"Exit code: {data['exit_code'] if data['exit_code'] is not None else -(data['signal'] or 0)}")
    return _text(result, "\n".join(parts) if parts else "(no output)")


# ---- grep, find_files ----------------------------------------------------------------------------


class GrepArgs(ToolInput):
    regex: str = Field(description="Python re regex pattern")
    include_pattern: str = Field("", description="Glob to restrict which files are searched (e.g. **/*.py)")
    case_sensitive: bool = Field(False, description="Whether the match is case-sensitive")
    max_results: int = Field(50, ge=1, description="Maximum matching lines to return")


def _included(rel: str, include: re.Pattern[str] | None) -> bool:
    parts = rel.split("/")
    return not any(skipped_dir(p) for p in parts[:-1]) and (include is None or include.fullmatch(rel) is not None)


async def _grep(ctx: ToolContext, args: GrepArgs) -> ToolResult:
    try:
        re.compile(args.regex, 0 if args.case_sensitive else re.IGNORECASE)
    except re.error as exc:
        raise ToolError("invalid_regex", f"Invalid regex: {exc}") from None
    root = ctx.cwd
    pattern = args.include_pattern
    # Path.rglob semantics: the pattern may match at any depth.
    include = glob_regex(pattern if pattern.startswith("**/") else "**/" + pattern) if pattern else None
    with op_errors(root):
        walk = await ctx.client.walk(root, include_hidden=True, ignore_files=())
    files = sorted(
        e.path for e in walk.entries
        if e.type == "file" and e.size <= MAX_GREP_FILE and _included(e.path, include)
        and not ctx.is_secret(posixpath.join(root, e.path))
    )
    total, lines = 0, []
    if files:
        with op_errors(root):
            counted = await _python_grep(ctx, root, args, files, "count", UNLIMITED)
            # A file with another name (a hard link) may be a secret's: neither counted nor shown.
            linked = set(counted.linked)
            total = sum(n for path, n in zip(counted.paths, counted.counts, strict=True) if path not in linked)
            shown = await _python_grep(ctx, root, args, files, "content", args.max_results)
        lines = [
            f"{shown_name(f.path)}:{h.line}:{h.lines[0].rstrip()}" for f in shown.files if f.nlink <= 1 for h in f.matches
        ][: args.max_results]
    if not lines:
        return ToolResult.success("No matches found.", {"total": 0, "matches": []})
    header = f"Found {total} match{'es' if total != 1 else ''}"
    if total > args.max_results:
        header += f" (showing first {args.max_results})"
    return ToolResult.success(header + ":\n" + "\n".join(lines), {"total": total, "matches": lines})


async def _python_grep(
    ctx: ToolContext, root: str, args: GrepArgs, files: list[str], mode: Literal["count", "content"], most: int
) -> GrepResult:
    """Python's own regex dialect, as the specification says: the daemon's Python engine."""
    return await ctx.client.grep(
        root, args.regex, paths=files, engine="python", mode=mode, ignore_case=not args.case_sensitive,
        max_total=most, max_line_chars=UNLIMITED, timeout=GREP_TIMEOUT,
    )


GREP = Tool(
    name="aar:grep",
    input_model=GrepArgs,
    handler=_grep,
    level=Level.SAFE,
    access="read",
    snippet="Search file contents with regex",
    paths=lambda a: ["."],
)


class FindFilesArgs(ToolInput):
    glob_pattern: str = Field(description="Glob pattern (e.g. **/*.py, *.md, src/**/*.ts)")
    max_results: int = Field(200, ge=1, description="Maximum file paths to return")

    _root: str = PrivateAttr("")


def _find(args: FindFilesArgs, ctx: ToolContext) -> Any:
    args._root = ctx.cwd
    pattern = args.glob_pattern
    return canonical_args(
        "glob", pattern=pattern if pattern.startswith("**/") else "**/" + pattern, path=args._root,
        limit=UNLIMITED, include_hidden=True, respect_gitignore=False, sort_by="path",
    )


def _present_find(result: ToolResult, args: FindFilesArgs) -> ToolResult:
    if not result.ok:
        return result
    rel = [posixpath.relpath(f, args._root) for f in result.data["files"]]
    files = [f for f in rel if _included(f, None)]
    if not files:
        empty = {"files": [], "total": 0, "truncated": False}
        return result.model_copy(update={"text": f"No files matching '{args.glob_pattern}' found.", "data": empty})
    total = len(files)
    header = f"Found {total} file{'s' if total != 1 else ''}"
    if total > args.max_results:
        header += f" (showing first {args.max_results})"
    shown = files[: args.max_results]
    # The structured result (MCP's structuredContent) says what the text says.
    data = {"files": shown, "total": total, "truncated": total > args.max_results}
    text = header + ":\n" + "\n".join(shown_name(f) for f in shown)
    return result.model_copy(update={"text": text, "data": data})


# ---- the profile ---------------------------------------------------------------------------------

GREP_GUIDELINE = "Use grep to search file contents (symbols, patterns); use find_files for path/filename searches."


def build() -> Profile:
    profile = Profile(name=NAME, description="Seed 003: Aar built-in tools")

    def add(name: str, canonical: str | Tool, model: type[ToolInput], level: Level, snippet: str, description: str,
            **kw: Any) -> None:
        tool = REGISTRY[canonical] if isinstance(canonical, str) else canonical
        profile.add(ProfileTool(name=name, canonical=tool, input_model=model, level=level, snippet=snippet,
                                description=description, **kw))

    add("read_file", "read_file", ReadFileArgs, Level.SAFE,
        "Read file contents (supports line ranges; large files return a preview)",
        "Read a file and return its contents with line numbers.",
        to_canonical=_read, present=_present_read)
    add("write_file", "write_file", WriteFileArgs, Level.CAUTIOUS,
        "Create or overwrite a file",
        "Write content to a file, creating parent directories as needed.",
        to_canonical=lambda a, s: canonical_args("write_file", path=a.path, content=a.content),
        present=_present_write)
    add("edit_file", "edit_file", EditFileArgs, Level.CAUTIOUS,
        "Replace an exact unique string in a file",
        "Replace an exact string in a file. The target string must appear exactly once.",
        to_canonical=_edit, present=_present_edit)
    add("list_directory", "ls", ListDirectoryArgs, Level.SAFE,
        "List files and directories at a path",
        "List files and directories at a given path with types and sizes.",
        to_canonical=_list, present=_present_list)
    add("bash", "bash", BashArgs, Level.DANGEROUS,
        "Execute a shell command (returns stdout, stderr, exit code)",
        "Execute a shell command and return stdout + stderr. Routed through the sandbox.",
        to_canonical=lambda a, s: canonical_args("bash", command=a.command, timeout=a.timeout),
        present=_present_bash)
    add("grep", GREP, GrepArgs, Level.SAFE,
        "Search file contents with regex",
        "Search file contents using a regex pattern (Python re). Returns matching lines as path:line:content. "
        "Skips hidden and generated directories and files over 2 MB.",
        guidelines=(GREP_GUIDELINE,))
    add("find_files", "glob", FindFilesArgs, Level.SAFE,
        "Find files by glob pattern",
        "Find files by glob pattern. Returns file paths relative to the working directory.",
        to_canonical=_find, present=_present_find)
    return profile
