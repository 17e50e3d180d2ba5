"""The `agent-air` profile: seed 000 ("Agent Air" standard tools) served exactly as written.

Differences from the canonical tools that the specification fixes: file, ls and bash paths
must be absolute; bash timeouts are milliseconds; edit_file replaces the first occurrence
unless replace_all (instead of refusing several matches) and tries whitespace-normalised
matching only when fuzzy_match is on; read_file refuses images like any binary file and
points a directory at ls; web_search is a no-op (the search runs on the model's side).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from caisson.policy import Level
from caisson.profiles.base import Profile, ProfileTool, canonical_args
from caisson.tools.base import REGISTRY, Tool, ToolError, ToolErrorInfo, ToolInput, ToolResult

if TYPE_CHECKING:
    from caisson.tools.context import ToolContext

NAME = "agent-air"



def absolute(path: str, field: str) -> str:
    if not path.startswith("/"):
        raise ToolError("relative_path", f"{field} must be an absolute path, got '{path}'")
    return path


def _fail(result: ToolResult, message: str) -> ToolResult:
    code = result.error.code if result.error else "error"
    return result.model_copy(update={"text": message, "error": ToolErrorInfo(code=code, message=message)})


# ---- file operations -----------------------------------------------------------------------------


class ReadFileArgs(ToolInput):
    file_path: str = Field(description="Absolute path to the file")
    offset: int = Field(0, ge=0, description="Line number to start from (0-based, default: 0)")
    limit: int = Field(2000, ge=1, description="Maximum lines to read (default: 2000)")


def _read(args: ReadFileArgs, ctx: ToolContext) -> Any:
    path = absolute(args.file_path, "file_path")
    # Images are binary formats here: seed 000 lists .png and .jpg among the rejected ones.
    return canonical_args(
        "read_file", path=path, offset=args.offset, limit=args.limit, encoding="text", images=False,
        directory="error",
    )


def _present_read(result: ToolResult, args: ReadFileArgs) -> ToolResult:
    code = result.error.code if result.error else None
    if code == "is_a_directory":
        return _fail(result, f"{args.file_path} is a directory, not a file. Use ls to list its contents.")
    if code == "binary_file":
        return _fail(
            result,
            f"Cannot read binary file: {args.file_path}. read_file returns text only; binary formats "
            "(archives, executables, images, PDFs, media) cannot be shown.",
        )
    return result


class WriteFileArgs(ToolInput):
    file_path: str = Field(description="Absolute path to the file")
    content: str = Field(description="Content to write")
    create_directories: bool = Field(True, description="Create parent directories (default: true)")


class EditFileArgs(ToolInput):
    file_path: str = Field(description="Absolute path to the file")
    old_string: str = Field(description="String to find")
    new_string: str = Field(description="Replacement string")
    replace_all: bool = Field(False, description="Replace all occurrences (default: false)")
    fuzzy_match: bool = Field(False, description="Enable fuzzy matching (default: false)")
    fuzzy_threshold: float = Field(0.7, ge=0.0, le=1.0, description="Similarity threshold 0.0-1.0 (default: 0.7)")


def _edit(args: EditFileArgs, ctx: ToolContext) -> Any:
    return canonical_args(
        "edit_file", path=absolute(args.file_path, "file_path"), old_string=args.old_string,
        new_string=args.new_string, replace_all=args.replace_all, fuzzy_match=args.fuzzy_match,
        fuzzy_threshold=args.fuzzy_threshold,
        # Seed 000: the whitespace-normalised stage belongs to fuzzy matching, and without
        # replace_all only the first occurrence is replaced.
        whitespace_match=args.fuzzy_match, on_multiple="first",
    )


class EditItem(ToolInput):
    old_string: str
    new_string: str
    replace_all: bool = Field(False, description="(default: false)")
    fuzzy_match: bool = Field(False, description="(default: false)")
    fuzzy_threshold: float = Field(0.7, ge=0.0, le=1.0, description="(default: 0.7)")


class MultiEditArgs(ToolInput):
    file_path: str = Field(description="Absolute path to the file")
    edits: list[EditItem] = Field(min_length=1, max_length=50, description="Array of edit objects")
    dry_run: bool = Field(False, description="Plan all edits without writing changes (default: false)")


def _multi_edit(args: MultiEditArgs, ctx: ToolContext) -> Any:
    return canonical_args(
        "multi_edit", path=absolute(args.file_path, "file_path"),
        edits=[e.model_dump() for e in args.edits], dry_run=args.dry_run,
        whitespace_match=any(e.fuzzy_match for e in args.edits), on_multiple="first",
    )


# ---- directory operations ------------------------------------------------------------------------


class LsArgs(ToolInput):
    path: str = Field(description="Absolute path to directory")
    long_format: bool = Field(False, description="Show detailed info (default: false)")
    include_hidden: bool = Field(False, description="Include dot files (default: false)")
    pattern: str | None = Field(None, description="Glob filter (e.g., '*.rs')")
    sort_by: Literal["name", "size", "modified"] = Field(
        "name", description="'name', 'size', or 'modified' (default: 'name')"
    )
    reverse: bool = Field(False, description="Reverse sort order (default: false)")
    directories_first: bool = Field(True, description="List dirs before files (default: true)")


class GlobArgs(ToolInput):
    pattern: str = Field(description="Glob pattern (e.g., '**/*.rs')")
    path: str | None = Field(None, description="Directory to search (default: current directory)")
    limit: int = Field(1000, ge=1, description="Max results (default: 1000)")
    include_hidden: bool = Field(False, description="Include hidden files (default: false)")


class GrepArgs(ToolInput):
    # The dashed flags are aliases: agents send "-i", Python code may use the field names.
    pattern: str = Field(description="Regex pattern to search")
    path: str | None = Field(None, description="File or directory to search (default: current directory)")
    glob: str | None = Field(None, description="Glob pattern filter (e.g., '*.js')")
    type: str | None = Field(None, description="File type (e.g., 'rust', 'js', 'py')")
    output_mode: Literal["files_with_matches", "content", "count"] = Field(
        "files_with_matches", description="'files_with_matches' (default), 'content', or 'count'"
    )
    case_insensitive: bool = Field(False, alias="-i", description="Case insensitive (default: false)")
    after: int | None = Field(None, ge=0, alias="-A", description="Lines after match")
    before: int | None = Field(None, ge=0, alias="-B", description="Lines before match")
    context: int | None = Field(None, ge=0, alias="-C", description="Context lines before and after")
    line_numbers: bool = Field(True, alias="-n", description="Show line numbers (default: true)")
    multiline: bool = Field(False, description="Let patterns span lines ('.' also matches newlines)")


def _grep(args: GrepArgs, ctx: ToolContext) -> Any:
    return canonical_args(
        "grep", pattern=args.pattern, path=args.path, glob=args.glob, type=args.type,
        output_mode=args.output_mode, ignore_case=args.case_insensitive,
        context_after=args.after or 0, context_before=args.before or 0, context=args.context,
        line_numbers=args.line_numbers, multiline=args.multiline, limit=1000,
    )


# ---- command execution ---------------------------------------------------------------------------


class BashArgs(ToolInput):
    command: str = Field(description="Bash command to execute")
    timeout: int = Field(
        120_000, le=600_000, description="Timeout in ms (default: 120000, max: 600000; below 1000 is raised to 1000)"
    )
    working_dir: str | None = Field(None, description="Working directory (must be absolute)")
    run_in_background: bool = Field(False, description="Run in background (default: false)")
    background_timeout: int | None = Field(None, gt=0, description="Background task timeout in ms")
    env: dict[str, str] | None = Field(None, description="Additional environment variables")


def _bash(args: BashArgs, ctx: ToolContext) -> Any:
    return canonical_args(
        "bash", command=args.command, timeout=args.timeout / 1000,
        working_dir=absolute(args.working_dir, "working_dir") if args.working_dir is not None else None,
        run_in_background=args.run_in_background,
        background_timeout=args.background_timeout / 1000 if args.background_timeout else None,
        env=args.env,
    )


# ---- search and discovery ------------------------------------------------------------------------


class WebSearchArgs(ToolInput):
    query: str = Field(description="The search query")


async def _web_search_noop(ctx: ToolContext, args: WebSearchArgs) -> ToolResult:
    # Seed 000: execute() is a no-op returning an empty string; results reach the model as
    # citations from the provider's own web search.
    return ToolResult.success("", {"query": args.query})


WEB_SEARCH = Tool(
    name="agent-air:web_search",
    input_model=WebSearchArgs,
    handler=_web_search_noop,
    level=Level.SAFE,
    access="none",
    snippet="Search the web (runs on the model provider's side; results arrive as citations)",
)


# ---- the profile ---------------------------------------------------------------------------------


def build() -> Profile:
    profile = Profile(name=NAME, description="Seed 000: Agent Air standard tools")

    def add(name: str, canonical: str | Tool, model: type[ToolInput] | None = None, **kw: Any) -> None:
        tool = REGISTRY[canonical] if isinstance(canonical, str) else canonical
        snippet = kw.pop("snippet", tool.snippet)
        # Canonical guidelines may name canonical tools (task_output): only unchanged tools keep them.
        guidelines = kw.pop("guidelines", () if model else tool.guidelines)
        profile.add(
            ProfileTool(
                name=name, canonical=tool, input_model=model or tool.input_model, snippet=snippet,
                description=kw.pop("description", snippet), guidelines=guidelines, **kw,
            )
        )

    add("read_file", "read_file", ReadFileArgs, to_canonical=_read, present=_present_read,
        snippet="Read a file with 1-based line numbers (offset/limit pagination; binary files are refused)")
    add("write_file", "write_file", WriteFileArgs,
        to_canonical=lambda a, s: canonical_args(
            "write_file", path=absolute(a.file_path, "file_path"), content=a.content,
            create_directories=a.create_directories,
        ),
        snippet="Write a file, creating or overwriting it (parent directories created by default)")
    add("edit_file", "edit_file", EditFileArgs, to_canonical=_edit,
        snippet="Find and replace in a file (exact, then whitespace-insensitive and Levenshtein fuzzy matching)")
    add("multi_edit", "multi_edit", MultiEditArgs, to_canonical=_multi_edit,
        snippet="Apply up to 50 find-and-replace edits to one file atomically (all or none; dry run available)")
    add("ls", "ls", LsArgs,
        to_canonical=lambda a, s: canonical_args(
            "ls", path=absolute(a.path, "path"), long_format=a.long_format, include_hidden=a.include_hidden,
            pattern=a.pattern, sort_by=a.sort_by, reverse=a.reverse, directories_first=a.directories_first,
        ),
        snippet="List a directory (long format, hidden files, glob filter, sorting)")
    add("glob", "glob", GlobArgs,
        to_canonical=lambda a, s: canonical_args(
            # Seed 000's glob skips hidden files and links; it never mentions .gitignore.
            "glob", pattern=a.pattern, path=a.path, limit=a.limit, include_hidden=a.include_hidden,
            respect_gitignore=False,
        ),
        snippet="Find files by glob pattern; newest first")
    add("grep", "grep", GrepArgs, to_canonical=_grep,
        snippet="Search file contents by regex (files_with_matches, content with -A/-B/-C, or count)")
    add("bash", "bash", BashArgs, to_canonical=_bash,
        snippet="Run a bash command (timeout in ms; working directory persists; background tasks)",
        guidelines=("Prefer read_file, edit_file, grep and glob over cat, sed and grep in bash.",))
    add("web_search", WEB_SEARCH, WebSearchArgs)
    add("list_skills", "list_skills")
    add("ask_user_questions", "ask_user_questions")
    add("ask_for_permissions", "ask_for_permissions")
    add("markdown_plan", "markdown_plan")
    add("update_plan_step", "update_plan_step")
    add("list_plans", "list_plans")
    add("read_plan", "read_plan")
    return profile
