"""ls and glob, plus the .gitignore rules (git's semantics, nested files included) that glob
and grep's pure-Python engine apply on the host with pathspec."""

from __future__ import annotations

import posixpath
import re
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Literal

from pathspec import GitIgnoreSpec
from pydantic import Field

from caisson.errors import OpError
from caisson.policy import Level
from caisson.tools.base import ToolError, ToolInput, ToolResult, tool
from caisson.tools.text import GitGlob, glob_regex, human_size, op_errors, permissions, shown_name

if TYPE_CHECKING:
    from caisson.client.models import DirEntry, WalkEntry, WalkResult
    from caisson.tools.context import ToolContext

IGNORE_FILE = ".gitignore"
# Never listed or searched: git's own database.
EXCLUDED_DIR = "!.git"
FIND_TIMEOUT = 120.0


class _Spec:
    """One .gitignore file. All its patterns also form one combined regex, so the common case
    (no pattern matches) costs a single regex call instead of one per pattern."""

    def __init__(self, lines: list[str]) -> None:
        self.spec = GitIgnoreSpec.from_lines(lines)
        parts = [
            p.regex.pattern.replace("(?P<ps_d>", "(?:")
            for p in self.spec.patterns
            if p.include is not None and p.regex is not None
        ]
        self.any = re.compile("|".join(f"(?:{part})" for part in parts)) if parts else None

    def check(self, sub: str) -> bool | None:
        if self.any is None or self.any.match(sub) is None:
            return None
        return self.spec.check_file(sub).include


class IgnoreRules:
    """The .gitignore files that apply below ``root``: those the walk found and those of the
    root's ancestors. The deepest file with a matching pattern decides; within a file the last
    matching pattern wins (``!`` re-includes)."""

    def __init__(self, root: str, found: dict[str, str], ancestors: dict[str, str]) -> None:
        self.root = root.rstrip("/")
        self.specs: dict[str, _Spec] = {}
        texts = {**ancestors, **{posixpath.normpath(posixpath.join(root, rel)): t for rel, t in found.items()}}
        for directory, text in texts.items():
            lines = text.splitlines()
            if any(line.strip() and not line.startswith("#") for line in lines):
                self.specs[directory] = _Spec(lines)
        self.has_negation = any(line.startswith("!") for t in texts.values() for line in t.splitlines())
        self._chains: dict[str, list[tuple[int, _Spec]]] = {}

    def _chain(self, directory: str) -> list[tuple[int, _Spec]]:
        """(length of the prefix to cut, spec) of the ignore files above ``directory``, deepest first."""
        chain = self._chains.get(directory)
        if chain is None:
            spec = self.specs.get(directory)
            own = [(len(directory.rstrip("/")) + 1, spec)] if spec is not None else []
            chain = own + (self._chain(posixpath.dirname(directory)) if directory != "/" else [])
            self._chains[directory] = chain
        return chain

    def state(self, rel: str, is_dir: bool) -> bool | None:
        """True: ignored; False: re-included by a ``!`` pattern; None: no pattern matches."""
        if not self.specs:
            return None
        path = f"{self.root}/{rel}"
        directory = path.rpartition("/")[0] or "/"
        suffix = "/" if is_dir else ""
        for cut, spec in self._chain(directory):
            include = spec.check(path[cut:] + suffix)
            if include is not None:
                return include
        return None


async def ancestor_ignores(ctx: ToolContext, root: str) -> dict[str, str]:
    """The .gitignore files of the directories above ``root`` (ripgrep applies them too)."""
    found: dict[str, str] = {}
    directory = root
    while directory != "/":
        directory = posixpath.dirname(directory)
        try:
            data = await ctx.client.read_file(posixpath.join(directory, IGNORE_FILE), 0, 1024 * 1024)
        except OpError:
            continue
        found[directory] = data.decode("utf-8", "replace")
    return found


async def walk_with_rules(
    ctx: ToolContext, root: str, hidden: bool, respect_ignore: bool
) -> tuple[WalkResult, IgnoreRules | None]:
    """A walk of ``root`` (hidden entries when ``hidden``) and the .gitignore rules below it."""
    with op_errors(root):
        walk = await ctx.client.walk(root, include_hidden=hidden)
    if not respect_ignore:
        return walk, None
    ancestors = await ancestor_ignores(ctx, root)
    rules = IgnoreRules(root, walk.ignore, ancestors)
    if not hidden and rules.has_negation:
        # A "!name" pattern can re-include a hidden file: look at hidden entries too.
        with op_errors(root):
            walk = await ctx.client.walk(root, include_hidden=True)
        rules = IgnoreRules(root, walk.ignore, ancestors)
    return walk, rules


async def search_root(ctx: ToolContext, path: str | None) -> tuple[str, str]:
    """The absolute search path and its type (file or dir), with seed 000's errors."""
    root = ctx.resolve(path or ".")
    with op_errors(root):
        st = await ctx.stat(root)  # usually the dispatcher's stat of it, for the policy
    if not st.exists:
        raise ToolError("not_found", f"Search path does not exist: {root}")
    if st.type not in ("file", "dir"):
        raise ToolError("not_a_directory", f"Search path is not a directory: {root}")
    return root, st.type


# ---- ls ------------------------------------------------------------------------------------


class LsInput(ToolInput):
    path: str = Field(".", description="Directory to list (absolute, or relative to the working directory)")
    long_format: bool = Field(False, description="Show permissions, size and modification time")
    include_hidden: bool = Field(False, description="Include entries whose names start with '.'")
    pattern: str | None = Field(None, description="Glob filter on entry names, e.g. '*.rs'")
    sort_by: Literal["name", "size", "modified"] = "name"
    reverse: bool = False
    directories_first: bool = True
    limit: int = Field(1000, ge=1, description="Maximum entries to show")


def _is_dir(entry: DirEntry, link_dirs: set[str]) -> bool:
    return entry.type == "dir" or entry.name in link_dirs


def _long_line(entry: DirEntry, is_dir: bool) -> str:
    when = datetime.fromtimestamp(entry.mtime, UTC).strftime("%b %d %H:%M")
    name = shown_name(entry.name) + ("/" if is_dir else "")
    if entry.type == "symlink":
        name += f" -> {shown_name(entry.target or '')}"
    return f"{permissions(entry.mode)} {human_size(entry.size):>8} {when} {name}"


@tool(
    "ls",
    LsInput,
    level=Level.SAFE,
    access="read",
    snippet="List a directory (long format, hidden files, glob filter, sorting)",
    paths=lambda a: [a.path],
)
async def ls(ctx: ToolContext, args: LsInput) -> ToolResult:
    path = ctx.resolve(args.path)
    with op_errors(path):
        st = await ctx.stat(path)
    if not st.exists:
        raise ToolError("not_found", f"Path does not exist: {path}")
    if st.type != "dir":
        raise ToolError("not_a_directory", f"Path is not a directory: {path}. Use read_file to read a file.")
    with op_errors(path):
        entries = await ctx.client.list_dir(path)
    matcher = glob_regex(args.pattern) if args.pattern else None
    entries = [
        e
        for e in entries
        if (args.include_hidden or not e.name.startswith("."))
        and (matcher is None or matcher.fullmatch(e.name) is not None)
    ]
    # A symbolic link to a directory lists as a directory, like ls -L would sort it.
    link_dirs = set()
    for entry in entries:
        if entry.type == "symlink":
            try:
                if (await ctx.client.stat(posixpath.join(path, entry.name))).type == "dir":
                    link_dirs.add(entry.name)
            except OpError:
                pass
    keys = {"name": lambda e: e.name.lower(), "size": lambda e: e.size, "modified": lambda e: e.mtime}
    entries.sort(key=keys[args.sort_by], reverse=args.reverse)
    if args.directories_first:
        entries.sort(key=lambda e: not _is_dir(e, link_dirs))
    total = len(entries)
    shown = entries[: args.limit]
    data = {
        "path": path,
        "total": total,
        "entries": [
            {
                "name": e.name,
                "type": "dir" if _is_dir(e, link_dirs) else e.type,
                "size": e.size,
                "mode": e.mode,
                "mtime": e.mtime,
                "target": e.target,
            }
            for e in shown
        ],
    }
    if not shown:
        return ToolResult.success("Directory is empty", data)
    if args.long_format:
        lines = [_long_line(e, _is_dir(e, link_dirs)) for e in shown]
    else:
        lines = [shown_name(e.name) + ("/" if _is_dir(e, link_dirs) else "") for e in shown]
    truncation = None
    if total > args.limit:
        lines.append(f"\n... and {total - args.limit} more entries (showing {args.limit}/{total})")
        truncation = {"shown": args.limit, "total": total}
    return ToolResult.success("\n".join(lines), data, truncated=truncation is not None, truncation=truncation)


# ---- glob ----------------------------------------------------------------------------------


class GlobInput(ToolInput):
    pattern: str = Field(description="Glob matched against paths relative to path, e.g. '**/*.rs' or 'src/*.{ts,tsx}'")
    path: str | None = Field(None, description="Directory to search (default: the working directory)")
    limit: int = Field(1000, ge=1, description="Maximum paths to return")
    offset: int = Field(0, ge=0, description="Matches to skip (pagination)")
    include_hidden: bool = Field(False, description="Include hidden files and directories")
    respect_gitignore: bool = Field(True, description="Skip paths that .gitignore files exclude")
    sort_by: Literal["modified", "path"] = Field("modified", description="modified: newest first")


def _visible(
    rel: str,
    name: str,
    is_dir: bool,
    overrides: list[GitGlob],
    rules: IgnoreRules | None,
    types: list[GitGlob],
    include_hidden: bool,
) -> bool:
    """Whether ripgrep would search (a file) or enter (a directory) ``rel``: ``--glob``
    overrides first (later wins; a whitelist beats ignore rules and hiddenness), then
    .gitignore, then the type filter, then hiddenness (a re-include or a type beats it)."""
    for glob in reversed(overrides):
        if glob.matches(rel, is_dir):
            return not glob.negated
    if not is_dir and any(not g.negated for g in overrides):
        return False
    whitelisted = False
    if rules is not None:
        state = rules.state(rel, is_dir)
        if state is True:
            return False
        whitelisted = state is False
    if types and not is_dir:
        if not any(t.matches(rel, False) for t in types):
            return False
        whitelisted = True
    return whitelisted or include_hidden or not name.startswith(".")


def select_files(
    walk: WalkResult, rules: IgnoreRules | None, overrides: list[GitGlob], types: list[GitGlob], include_hidden: bool
) -> list[WalkEntry]:
    """The files of a walk ripgrep would search (or list); symbolic links are skipped."""
    pruned: set[str] = set()
    selected = []
    for entry in walk.entries:
        parent, _, name = entry.path.rpartition("/")
        is_dir = entry.type == "dir"
        if parent in pruned or entry.type not in ("file", "dir"):
            if is_dir:
                pruned.add(entry.path)
            continue
        if not _visible(entry.path, name, is_dir, overrides, rules, types, include_hidden):
            if is_dir:
                pruned.add(entry.path)
            continue
        # A file whitelisted by --glob still has to be of the requested type.
        if not is_dir and (not types or any(t.matches(entry.path, False) for t in types)):
            selected.append(entry)
    return selected


# A last component made of these alone (not starting with a dot, which ripgrep's file types
# handle apart) means the same to ripgrep's globs as to ours.
_PLAIN_NAME_GLOB = re.compile(r"[A-Za-z0-9_*?+ -][A-Za-z0-9._*?+ -]*")


def name_globs(pattern: str) -> list[str]:
    """A file-name glob every file matching ``pattern`` satisfies (its last component), for
    ripgrep to list only those; none when that component needs our own glob rules."""
    name = pattern.rsplit("/", 1)[-1]
    return [name] if "**" not in name and _PLAIN_NAME_GLOB.fullmatch(name) else []


async def find_files(
    ctx: ToolContext, root: str, pattern: str, args: GlobInput, engine: Literal["auto", "rg", "python"] = "auto"
) -> tuple[int, list[tuple[str, float]], bool]:
    """Files below ``root`` matching the glob ``pattern`` with ripgrep's selection rules: the
    total, one page of (relative path, mtime), and whether the listing is incomplete."""
    regex = glob_regex(pattern)
    if engine == "auto":
        if ctx.client.info is None:
            await ctx.client.ping()
        engine = "rg" if ctx.client.info and ctx.client.info.rg else "python"
    if engine == "rg":
        with op_errors(root):
            reply = await ctx.client.find(
                root, "(?s)" + regex.pattern, hidden=args.include_hidden, no_ignore=not args.respect_gitignore,
                globs=[EXCLUDED_DIR], type_globs=name_globs(pattern), sort=args.sort_by, offset=args.offset,
                limit=args.limit, timeout=FIND_TIMEOUT,
            )
        return reply.total, reply.files, reply.timed_out
    walk, rules = await walk_with_rules(ctx, root, args.include_hidden, args.respect_gitignore)
    selected = select_files(walk, rules, [GitGlob(EXCLUDED_DIR)], [], args.include_hidden)
    matched = [(e.path, e.mtime) for e in selected if regex.fullmatch(e.path)]
    if args.sort_by == "modified":
        matched.sort(key=lambda item: (-item[1], item[0]))
    else:
        matched.sort()
    return len(matched), matched[args.offset : args.offset + args.limit], walk.truncated


@tool(
    "glob",
    GlobInput,
    level=Level.SAFE,
    access="read",
    snippet="Find files by glob pattern (**, *, ?, [abc], {a,b}); newest first; respects .gitignore",
    paths=lambda a: [a.path or "."],
)
async def glob(ctx: ToolContext, args: GlobInput) -> ToolResult:
    root, kind = await search_root(ctx, args.path)
    if kind != "dir":
        raise ToolError("not_a_directory", f"Search path is not a directory: {root}")
    # An absolute pattern under the search root is taken relative to it.
    prefix = root.rstrip("/") + "/"
    pattern = args.pattern.removeprefix(prefix)
    total, page, incomplete = await find_files(ctx, root, pattern, args)
    remaining = max(0, total - args.offset - len(page))
    files = [prefix + rel for rel, _ in page]  # relative to the root, as the daemon and walk give them
    data = {"files": files, "total": total, "remaining": remaining, "offset": args.offset, "incomplete": incomplete}
    if not files:
        text = f"No files found matching pattern '{args.pattern}' in '{root}'"
    else:
        text = "\n".join(shown_name(f) for f in files)
        if remaining:
            text += f"\n\n... and {remaining} more files (showing {len(files)}/{total})"
    if incomplete:
        text += "\n\n(The directory tree could not be listed completely; results are incomplete.)"
    truncated = bool(remaining) or incomplete
    truncation = {"remaining": remaining, "next_offset": args.offset + len(page)} if truncated else None
    return ToolResult.success(text, data, truncated=truncated, truncation=truncation)
