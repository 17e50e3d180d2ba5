"""The `grida` profile: seed 002 (Grida's fundamental tools) served exactly as written.

Results are Grida's objects (``text`` is their JSON): read_file gives ``{content, version}``,
edit_file and write_file ``{ok: true, version[, occurrences]}`` or
``{ok: false, reason, message[, current_version, occurrences]}``, list_files ``{files}``,
grep_files ``{matches: [{path, line, text}], files_scanned}``. The version is caisson's
freshness token, the SHA-256 of the content (a string); an edit or write that passes an old
one is refused with reason ``stale``. grep_files is a literal, case-sensitive search unless
told otherwise. "Every known file" is every file under the workspace root that is not hidden
and not excluded by .gitignore.
"""

from __future__ import annotations

import base64
import posixpath
from typing import TYPE_CHECKING, Any

from pydantic import Field

from caisson.policy import Level
from caisson.profiles.base import Profile, ProfileTool, canonical_args
from caisson.tools.base import REGISTRY, Tool, ToolErrorInfo, ToolInput, ToolResult
from caisson.tools.text import shown_json

if TYPE_CHECKING:
    from caisson.tools.context import ToolContext

NAME = "grida"
PATH_DESCRIPTION = (
    "Absolute path in the agent filesystem, starting with `/`. Examples: `/canvas.svg`, `/notes/draft.md`."
)
MAX_FILES = 100_000



def fs_root(ctx: ToolContext) -> str:
    """The session directory Grida's agent filesystem is mapped onto (the workdir)."""
    return posixpath.normpath(ctx.config.workdir)


def to_container(ctx: ToolContext, path: str) -> str:
    """The container path of the agent's ``path`` ("/notes/draft.md"); ".." cannot leave the root."""
    return posixpath.join(fs_root(ctx), posixpath.normpath("/" + path).lstrip("/")).rstrip("/") or "/"


def to_agent(ctx: ToolContext, path: str) -> str:
    """The agent's own path for a container path beneath the root."""
    rel = posixpath.relpath(path, fs_root(ctx))
    return "/" if rel == "." else "/" + rel


def _object(result: ToolResult, value: dict[str, Any]) -> ToolResult:
    ok = value.get("ok", True) is not False
    error = None
    if not ok:
        error = ToolErrorInfo(code=value["reason"], message=value["message"])
    return result.model_copy(
        update={"ok": ok, "error": error, "text": shown_json(value), "data": value}
    )


def _failure(result: ToolResult, reason: str, message: str, **extra: Any) -> ToolResult:
    return _object(result, {"ok": False, "reason": reason, "message": message, **extra})


def _passthrough_failure(result: ToolResult) -> ToolResult:
    error = result.error or ToolErrorInfo(code="error", message=result.text)
    return _failure(result, error.code, error.message)


# ---- read_file, edit_file, write_file ------------------------------------------------------------


class ReadFileArgs(ToolInput):
    path: str = Field(description=PATH_DESCRIPTION)


def _present_read(result: ToolResult, args: ReadFileArgs) -> ToolResult:
    if result.error and result.error.code == "not_found":
        return _failure(result, "not_found", f"No file at {args.path}.")
    if not result.ok:
        return _passthrough_failure(result)
    content = base64.b64decode(result.data["content"]).decode("utf-8", "replace")
    return _object(result, {"content": content, "version": result.data["version"]})


class EditFileArgs(ToolInput):
    path: str = Field(description=PATH_DESCRIPTION)
    old_string: str = Field(
        min_length=1,
        description="Exact snippet from the read_file output. Include enough surrounding context to be unique.",
    )
    new_string: str = Field(description="Replacement text. May be empty to delete the matched range.")
    replace_all: bool | None = Field(
        None, description="Default false. When false, ambiguous matches reject with reason='ambiguous'."
    )
    version: str = Field(description="Version from the most recent read_file.")


def _present_edit(result: ToolResult, args: EditFileArgs) -> ToolResult:
    code = result.error.code if result.error else None
    path = args.path
    if code == "not_found":
        return _failure(result, "not_found", f"No file at {path}.")
    if code == "conflict":
        return _failure(
            result, "stale", f"File at {path} changed since you last read it.",
            current_version=(result.data or {}).get("version"),
        )
    if code == "no_change":
        return _failure(result, "no_op", "`old_string` and `new_string` are identical.")
    if code == "no_match":
        return _failure(
            result, "not_found",
            f"`old_string` not found in {path}. Re-read with read_file and copy the snippet verbatim.",
        )
    if code == "multiple_matches":
        count = (result.data or {}).get("matches")
        return _failure(
            result, "ambiguous",
            f"`old_string` matched {count} locations in {path}. Add context to disambiguate or pass replace_all=true.",
            occurrences=count,
        )
    if not result.ok:
        return _passthrough_failure(result)
    return _object(result, {"ok": True, "version": result.data["version"], "occurrences": result.data["replacements"]})


class WriteFileArgs(ToolInput):
    path: str = Field(description=PATH_DESCRIPTION)
    content: str = Field(description="Complete new content for the file.")
    version: str | None = Field(
        None,
        description="Optional. When provided, the write fails with reason='stale' unless the current version "
        "matches. Omit for permissive write.",
    )


def _present_write(result: ToolResult, args: WriteFileArgs) -> ToolResult:
    if result.error and result.error.code == "conflict":
        current = (result.data or {}).get("version")
        if current is None:
            return _failure(result, "not_found", f"No file at {args.path}. Omit version to create it.")
        return _failure(
            result, "stale", f"File at {args.path} changed since you last read it. Re-read and retry.",
            current_version=current,
        )
    if not result.ok:
        return _passthrough_failure(result)
    return _object(result, {"ok": True, "version": result.data["version"]})


# ---- list_files, grep_files ----------------------------------------------------------------------


class ListFilesArgs(ToolInput):
    pass


async def _list_files(ctx: ToolContext, args: ListFilesArgs) -> ToolResult:
    files = await known_files(ctx)
    value = {"files": sorted(to_agent(ctx, f) for f in files)}
    return ToolResult.success(shown_json(value), value)


LIST_FILES = Tool(
    name="grida:list_files",
    input_model=ListFilesArgs,
    handler=_list_files,
    level=Level.SAFE,
    access="read",
    snippet="Enumerate every known file",
    paths=lambda a: ["."],
)


class GrepFilesArgs(ToolInput):
    pattern: str = Field(
        min_length=1, description="Literal substring to match. Not a regex. Case-sensitive by default."
    )
    path_prefix: str | None = Field(
        None, description="Limit to paths starting with this prefix (e.g. `/notes/`). Omit to scan everything."
    )
    case_sensitive: bool | None = Field(
        None, description="Default true. Pass false for case-insensitive match (mirrors `grep -i`)."
    )


def _all_files(ctx: ToolContext) -> Any:
    # "Enumerate every known file": dot-files and ignored files too (a .gitignore is the
    # agent's own business); git's internals are not files the agent wrote.
    return canonical_args(
        "glob", pattern="**", path=ctx.config.workdir, limit=MAX_FILES, sort_by="path",
        include_hidden=True, respect_gitignore=False,
    )


async def known_files(ctx: ToolContext) -> list[str]:
    """Absolute paths of every known file (what list_files returns), sorted."""
    result = await REGISTRY["glob"].handler(ctx, _all_files(ctx))
    return sorted(f for f in result.data["files"] if "/.git/" not in f)


async def _grep_files(ctx: ToolContext, args: GrepFilesArgs) -> ToolResult:
    # Like `grep -n -F` over the known files; files_scanned counts every file looked at.
    root = fs_root(ctx)
    # The agent's prefix, as a prefix of container paths ("/notes/" -> "<root>/notes/").
    prefix = None if args.path_prefix is None else root.rstrip("/") + "/" + args.path_prefix.lstrip("/")
    # Every known file, less those a read would be refused (secrets): a search must not show them.
    files = [f for f in await known_files(ctx) if (prefix is None or f.startswith(prefix)) and not ctx.is_secret(f)]
    matches: list[dict[str, Any]] = []
    if files:
        reply = await ctx.client.grep(
            root, args.pattern, paths=[posixpath.relpath(f, root) for f in files], fixed_strings=True,
            ignore_case=args.case_sensitive is False, max_total=1_000_000, max_line_chars=1_000_000, timeout=60.0,
        )
        matches = [
            {"path": to_agent(ctx, posixpath.join(root, f.path)), "line": h.line, "text": h.lines[0] if h.lines else ""}
            for f in reply.files
            if f.nlink <= 1  # another name of the file may be a secret's
            for h in f.matches
        ]
    value = {"matches": matches, "files_scanned": len(files)}
    return ToolResult.success(shown_json(value), value)


GREP_FILES = Tool(
    name="grida:grep_files",
    input_model=GrepFilesArgs,
    handler=_grep_files,
    level=Level.SAFE,
    access="read",
    snippet="Literal substring search across every known file",
    # The whole agent filesystem is the workdir: the search starts there whatever the prefix.
    paths=lambda a: ["."],
)


# ---- the profile ---------------------------------------------------------------------------------


def build() -> Profile:
    profile = Profile(name=NAME, description="Seed 002: Grida's fundamental tools")

    def add(name: str, canonical: str | Tool, model: type[ToolInput] | None = None, **kw: Any) -> None:
        tool = REGISTRY[canonical] if isinstance(canonical, str) else canonical
        snippet = kw.pop("snippet", tool.snippet)
        # Canonical guidelines may name canonical tools: only unchanged tools keep them.
        guidelines = kw.pop("guidelines", () if model else tool.guidelines)
        profile.add(
            ProfileTool(name=name, canonical=tool, input_model=model or tool.input_model, snippet=snippet,
                        description=kw.pop("description", snippet), guidelines=guidelines, **kw)
        )

    add("read_file", "read_file", ReadFileArgs,
        to_canonical=lambda a, s: canonical_args(
            "read_file", path=to_container(s, a.path), encoding="base64", images=False, directory="error"
        ),
        present=_present_read,
        snippet="Read a file's content and version (a freshness token)",
        description="Read a file's content and version (a freshness token).\n\nAlways call this before your first "
        "edit_file on a given path, and re-read whenever an edit / write returns reason='stale'.")
    add("edit_file", "edit_file", EditFileArgs,
        to_canonical=lambda a, s: canonical_args(
            "edit_file", path=to_container(s, a.path), old_string=a.old_string, new_string=a.new_string,
            replace_all=bool(a.replace_all), expected_version=a.version, whitespace_match=True, fuzzy_match=False,
            on_multiple="error",
        ),
        present=_present_edit,
        snippet="Match-and-replace edit on a file (literal, then whitespace-normalized; version-checked)",
        description="Match-and-replace edit on a file. Find `old_string` and replace with `new_string`.\n\n"
        "Matching: literal substring first, then whitespace-normalized fallback. Must be unique unless "
        "`replace_all` is true.\n\nRequires the version from read_file. On reason='stale', the file changed "
        "in the meantime — read_file again and retry.")
    add("write_file", "write_file", WriteFileArgs,
        to_canonical=lambda a, s: canonical_args(
            "write_file", path=to_container(s, a.path), content=a.content, expected_version=a.version
        ),
        present=_present_write,
        snippet="Full-file upsert; pass version for a staleness-checked rewrite",
        description="Full-file upsert. Replace the entire content of `path` with `content`. For surgical changes, "
        "prefer edit_file.\n\n`version` is optional: include it (from the most recent read_file) for a "
        "staleness-checked rewrite; omit it for a permissive write (creates the file if missing).")
    add("list_files", LIST_FILES, ListFilesArgs,
        snippet="Enumerate every known file (sorted absolute paths)",
        description="Enumerate every known file in the agent filesystem. Returns sorted absolute paths.")
    add("grep_files", GREP_FILES, GrepFilesArgs,
        snippet="Literal substring search across every known file (one entry per matching line)",
        description="Literal substring search across every known file. Mirrors `grep -n -F`: returns one entry "
        "per matching line with a 1-indexed line number and the full line text. Does NOT count as a read_file.")
    add("todo_write", "todo_write",
        description="Plan and track work. Pass the complete list of todos every call — the prior list is replaced "
        "wholesale. Exactly one in_progress at a time.")
    add("tool_search", "tool_search",
        description="Find tools by intent (query) or exact names (select); returns their full schemas.")
    return profile
