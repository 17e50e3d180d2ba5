"""edit_file (find-and-replace or a line range), multi_edit and undo_edit.

Every change reads the file, computes the new content on the host and writes it back with a
compare-and-swap on the hash of what was read: a concurrent change makes the edit fail with
``conflict`` instead of being overwritten. Each change (also write_file's and delete_file's)
is kept in the session's undo history, so undo_edit can restore the previous content.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise
from typing import TYPE_CHECKING, Literal

from pydantic import Field, model_validator

from caisson.policy import Level
from caisson.tools.base import ToolError, ToolInput, ToolResult, tool
from caisson.tools.files import matching
from caisson.tools.text import (
    changed_lines,
    decode,
    dominant_newline,
    encode,
    is_binary_content,
    is_binary_extension,
    op_errors,
    printable,
    sha256_hex,
    shorten,
    split_keepends,
    unified_diff,
)

if TYPE_CHECKING:
    from caisson.client.models import WriteResult
    from caisson.tools.context import ToolContext

# Larger files are not edited in memory on the host.
MAX_EDIT_BYTES = 64 * 1024 * 1024
# Undo keeps previous contents up to this size per change, and this much per session.
UNDO_MAX_FILE = 16 * 1024 * 1024
UNDO_MAX_TOTAL = 128 * 1024 * 1024
MAX_EDITS = 50


# ---- undo history ------------------------------------------------------------------------


@dataclass
class Change:
    path: str
    before: bytes | None  # None: the file did not exist (or was too large to keep, see ``kept``)
    after: str | None  # sha256 the change left behind; None: the change removed the file
    kept: bool = True


class History:
    """Changes of one session, oldest first; the oldest are dropped past UNDO_MAX_TOTAL."""

    def __init__(self) -> None:
        self.changes: list[Change] = []
        self.size = 0

    def add(self, change: Change) -> None:
        self.changes.append(change)
        self.size += len(change.before or b"")
        while self.size > UNDO_MAX_TOTAL and len(self.changes) > 1:
            self.size -= len(self.changes.pop(0).before or b"")

    def last(self, path: str) -> Change | None:
        return next((c for c in reversed(self.changes) if c.path == path), None)

    def drop(self, path: str, *, all_of_path: bool = False) -> None:
        """Forget the newest change of ``path`` (or all of them)."""
        for i in range(len(self.changes) - 1, -1, -1):
            if self.changes[i].path == path:
                self.size -= len(self.changes[i].before or b"")
                del self.changes[i]
                if not all_of_path:
                    return


def history(ctx: ToolContext) -> History:
    return ctx.tool_state("edit.history", History)


def record_change(ctx: ToolContext, path: str, before: bytes | None, after: str | None, *, kept: bool = True) -> None:
    """Remember that ``path`` held ``before`` (None: did not exist) until a change left ``after``."""
    if before is not None and len(before) > UNDO_MAX_FILE:
        before, kept = None, False
    history(ctx).add(Change(ctx.resolve(path), before, after, kept))


# ---- reading and committing ----------------------------------------------------------------


@dataclass
class Loaded:
    path: str
    data: bytes
    text: str
    sha256: str


async def load_text(ctx: ToolContext, path: str) -> Loaded:
    """A text file's content and hash, for changing it; clear errors for anything else."""
    path = ctx.resolve(path)
    with op_errors(path):
        st = await ctx.stat(path)
    if not st.exists:
        raise ToolError("not_found", f"File does not exist: {path}")
    if st.type == "dir":
        raise ToolError("is_a_directory", f"Path is a directory: {path}")
    if st.type != "file":
        raise ToolError("not_a_file", f"Not a regular file: {path}")
    if st.size > MAX_EDIT_BYTES:
        raise ToolError("too_large", f"File is too large to edit ({st.size} bytes; at most {MAX_EDIT_BYTES})")
    with op_errors(path):
        data = await ctx.client.read_file(path)
    if is_binary_extension(path) or is_binary_content(data):
        raise ToolError("binary_file", f"Cannot edit binary file: {path}")
    return Loaded(path, data, decode(data), sha256_hex(data))


def check_version(loaded: Loaded, expected: str | None) -> None:
    if expected is not None and expected != loaded.sha256:
        raise ToolError(
            "conflict",
            f"'{loaded.path}' has changed since that version was read; read it again and retry.",
            {"version": loaded.sha256},
        )


def to_bytes(text: str) -> bytes:
    try:
        return encode(text)
    except UnicodeEncodeError:
        raise ToolError("invalid_arguments", "The new text is not valid Unicode (it has a lone surrogate)") from None


async def commit(ctx: ToolContext, loaded: Loaded, text: str) -> WriteResult:
    """Write ``text`` only if the file still holds what was loaded (``sha256`` "": a new file
    that must not exist yet); remember the change for undo."""
    with op_errors(loaded.path):
        result = await ctx.client.write_file(loaded.path, to_bytes(text), expected_sha256=loaded.sha256)
    record_change(ctx, loaded.path, loaded.data if loaded.sha256 else None, result.sha256)
    return result


def change_data(path: str, before: str, after: str, version: str | None) -> dict[str, object]:
    first, last = changed_lines(before, after)
    return {
        "path": path,
        "diff": printable(unified_diff(before, after, path, path)),
        "line_range": [first, last],
        "version": version,
    }


# ---- edit_file -----------------------------------------------------------------------------


class EditFileInput(ToolInput):
    path: str = Field(description="File to edit (absolute, or relative to the working directory)")
    old_string: str | None = Field(None, description="Text to replace; omit when replacing a line range")
    new_string: str = Field(description="Replacement text")
    replace_all: bool = Field(False, description="Replace every occurrence of old_string")
    fuzzy_match: bool = Field(False, description="Fall back to Levenshtein similarity when old_string is not found")
    fuzzy_threshold: float = Field(0.7, ge=0.0, le=1.0, description="Lowest similarity a fuzzy match may have")
    whitespace_match: bool = Field(True, description="Fall back to matching with whitespace runs collapsed")
    on_multiple: Literal["error", "first"] = Field(
        "error", description="Several matches without replace_all: fail, or replace the first"
    )
    start_line: int | None = Field(None, ge=1, description="Line-range mode: first line to replace (1-based)")
    end_line: int | None = Field(None, ge=1, description="Line-range mode: last line to replace (inclusive)")
    expected_version: str | None = Field(None, description="Version from read_file; a changed file is not edited")

    @model_validator(mode="after")
    def _one_mode(self) -> EditFileInput:
        ranged = self.start_line is not None or self.end_line is not None
        if ranged and (self.start_line is None or self.end_line is None):
            raise ValueError("line-range mode needs both start_line and end_line")
        if ranged == (self.old_string is not None):
            raise ValueError("give either old_string or start_line and end_line")
        if ranged and self.end_line < self.start_line:  # type: ignore[operator]
            raise ValueError("end_line is before start_line")
        return self


def _not_found(old: str, fuzzy: bool, threshold: float, search: matching.Search, prefix: str = "") -> ToolError:
    if fuzzy:
        message = f"No match found for '{shorten(old, 50)}' with threshold {threshold * 100:.0f}%"
    else:
        message = f"String not found in file: '{shorten(old, 50)}'"
    data = {"best_similarity": round(search.best_similarity, 4), "best_line": search.best_line} if fuzzy else None
    return ToolError("no_match", prefix + message, data)


def _select(
    search: matching.Search, replace_all: bool, on_multiple: str, old: str, prefix: str = ""
) -> list[matching.Match]:
    found = search.matches
    if len(found) > 1 and not replace_all:
        if on_multiple == "error":
            raise ToolError(
                "multiple_matches",
                f"{prefix}Found {len(found)} matches for '{shorten(old, 50)}'. Add surrounding lines to make it "
                "unique, or set replace_all to replace every occurrence.",
                {"matches": len(found)},
            )
        return found[:1]
    return found


def _apply(text: str, matches: list[matching.Match]) -> str:
    # From the end backwards, so earlier offsets stay valid.
    for m in sorted(matches, key=lambda m: m.start, reverse=True):
        text = text[: m.start] + m.replacement + text[m.end :]
    return text


def replace_lines(text: str, start: int, end: int, new: str) -> str:
    lines = split_keepends(text)
    if end > len(lines):
        raise ToolError("invalid_range", f"Line range {start}-{end} is outside the file ({len(lines)} lines)")
    last = lines[end - 1]
    terminator = last[len(last.rstrip("\r\n")) :]
    if dominant_newline(text) == "\r\n" and "\r" not in new:
        new = new.replace("\n", "\r\n")
    if new and terminator and not new.endswith("\n"):
        new += terminator
    return "".join(lines[: start - 1]) + new + "".join(lines[end:])


@tool(
    "edit_file",
    EditFileInput,
    level=Level.CAUTIOUS,
    access="write",
    reads=True,
    snippet="Replace text in a file (exact, whitespace-insensitive or fuzzy match) or replace a line range",
    paths=lambda a: [a.path],
)
async def edit_file(ctx: ToolContext, args: EditFileInput) -> ToolResult:
    loaded = await load_text(ctx, args.path)
    path = loaded.path
    check_version(loaded, args.expected_version)
    if args.old_string is None:
        assert args.start_line is not None and args.end_line is not None
        new_text = replace_lines(loaded.text, args.start_line, args.end_line, args.new_string)
        if new_text == loaded.text:
            raise ToolError("no_change", f"Lines {args.start_line}-{args.end_line} already hold that content")
        result = await commit(ctx, loaded, new_text)
        return ToolResult.success(
            f"Successfully replaced lines {args.start_line}-{args.end_line} in '{path}'",
            {**change_data(path, loaded.text, new_text, result.sha256), "replacements": 1},
        )
    old, new = args.old_string, args.new_string
    if old == new:
        raise ToolError("no_change", "old_string and new_string are identical")
    if not old:
        raise ToolError("invalid_arguments", "old_string must not be empty; use write_file to create a file")
    search = matching.find(
        loaded.text,
        old,
        new,
        whitespace=args.whitespace_match,
        fuzzy=args.fuzzy_match,
        threshold=args.fuzzy_threshold,
    )
    if not search.matches:
        raise _not_found(old, args.fuzzy_match, args.fuzzy_threshold, search)
    chosen = _select(search, args.replace_all, args.on_multiple, old)
    new_text = _apply(loaded.text, chosen)
    result = await commit(ctx, loaded, new_text)
    stage, similarity = chosen[0].stage, chosen[0].similarity
    info = ""
    if args.fuzzy_match or stage != "exact":
        info = f" (match type: {matching.STAGE_NAMES[stage]}, similarity: {similarity * 100:.1f}%)"
    return ToolResult.success(
        f"Successfully made {len(chosen)} replacement(s) in '{path}'{info}",
        {
            **change_data(path, loaded.text, new_text, result.sha256),
            "replacements": len(chosen),
            "match": {"stage": stage, "similarity": round(similarity, 4)},
        },
    )


# ---- multi_edit ----------------------------------------------------------------------------


class EditSpec(ToolInput):
    old_string: str = Field(description="Text to replace (must not be empty)")
    new_string: str = Field(description="Replacement text")
    replace_all: bool = False
    fuzzy_match: bool = False
    fuzzy_threshold: float = Field(0.7, ge=0.0, le=1.0)


class MultiEditInput(ToolInput):
    path: str = Field(description="File to edit (absolute, or relative to the working directory)")
    edits: list[EditSpec] = Field(min_length=1, max_length=MAX_EDITS, description="Edits, located in the original file")
    dry_run: bool = Field(False, description="Plan and report the edits without writing")
    whitespace_match: bool = Field(True, description="Fall back to matching with whitespace runs collapsed")
    on_multiple: Literal["error", "first"] = "error"
    expected_version: str | None = Field(None, description="Version from read_file; a changed file is not edited")


@dataclass(frozen=True)
class _Planned:
    index: int
    match: matching.Match


def plan_edits(text: str, args: MultiEditInput) -> list[_Planned]:
    """Locate every edit in the original text; any failure (or an overlap) fails them all."""
    planned: list[_Planned] = []
    for index, edit in enumerate(args.edits, 1):
        prefix = f"Edit {index}: "
        if edit.old_string == edit.new_string:
            raise ToolError("no_change", f"{prefix}old_string and new_string are identical")
        if not edit.old_string:
            raise ToolError("invalid_arguments", f"{prefix}old_string must not be empty")
        search = matching.find(
            text,
            edit.old_string,
            edit.new_string,
            whitespace=args.whitespace_match,
            fuzzy=edit.fuzzy_match,
            threshold=edit.fuzzy_threshold,
        )
        if not search.matches:
            raise _not_found(edit.old_string, edit.fuzzy_match, edit.fuzzy_threshold, search, prefix)
        chosen = _select(search, edit.replace_all, args.on_multiple, edit.old_string, prefix)
        planned.extend(_Planned(index, m) for m in chosen)
    ordered = sorted(planned, key=lambda p: (p.match.start, p.match.end))
    for a, b in pairwise(ordered):
        if b.match.start < a.match.end:
            first, second = sorted((a.index, b.index))
            raise ToolError("overlapping_edits", f"Edits {first} and {second} have overlapping regions")
    return planned


@tool(
    "multi_edit",
    MultiEditInput,
    level=Level.CAUTIOUS,
    access="write",
    reads=True,
    snippet="Apply up to 50 find-and-replace edits to one file atomically (all or none), optionally as a dry run",
    paths=lambda a: [a.path],
)
async def multi_edit(ctx: ToolContext, args: MultiEditInput) -> ToolResult:
    loaded = await load_text(ctx, args.path)
    path = loaded.path
    check_version(loaded, args.expected_version)
    planned = plan_edits(loaded.text, args)
    new_text = _apply(loaded.text, [p.match for p in planned])
    fuzzy = [p.match.similarity for p in planned if p.match.stage != "exact"]
    mean = sum(fuzzy) / len(fuzzy) if fuzzy else None
    size_before, size_after = len(loaded.data), len(to_bytes(new_text))
    data = {
        "applied": len(planned),
        "fuzzy": len(fuzzy),
        "mean_similarity": None if mean is None else round(mean, 4),
        "size_before": size_before,
        "size_after": size_after,
        "size_delta": size_after - size_before,
        "dry_run": args.dry_run,
    }
    if args.dry_run:
        text = f"Dry run: {len(planned)} edit(s) would be applied to '{path}'\n"
        if fuzzy:
            text += f"  ({len(fuzzy)} fuzzy matches, avg {mean * 100:.0f}% similarity)\n"  # type: ignore[operator]
        text += (
            f"\nOriginal: {size_before} bytes\nModified: {size_after} bytes\nDelta: {size_after - size_before} bytes"
        )
        return ToolResult.success(text, {**change_data(path, loaded.text, new_text, loaded.sha256), **data})
    result = await commit(ctx, loaded, new_text)
    text = f"Successfully applied {len(planned)} edit(s) to '{path}'"
    if fuzzy:
        text += f" ({len(fuzzy)} fuzzy matches, avg {mean * 100:.0f}% similarity)"  # type: ignore[operator]
    return ToolResult.success(text, {**change_data(path, loaded.text, new_text, result.sha256), **data})


# ---- undo_edit -----------------------------------------------------------------------------


class UndoEditInput(ToolInput):
    path: str = Field(description="File whose last change (edit, write or delete) to revert")


@tool(
    "undo_edit",
    UndoEditInput,
    level=Level.CAUTIOUS,
    access="write",
    snippet="Revert the last change made to a file in this session",
    paths=lambda a: [a.path],
)
async def undo_edit(ctx: ToolContext, args: UndoEditInput) -> ToolResult:
    path = ctx.resolve(args.path)
    changes = history(ctx)
    change = changes.last(path)
    if change is None:
        raise ToolError("no_history", f"No change to undo for '{path}'")
    if not change.kept:
        changes.drop(path, all_of_path=True)
        raise ToolError(
            "too_large", f"The content of '{path}' before its last change was too large to keep; cannot undo"
        )
    with op_errors(path):
        st = await ctx.client.stat(path, follow=False)
        current = await ctx.client.read_file(path) if st.exists and st.type == "file" else None
    current_sha = None if current is None else sha256_hex(current)
    if current_sha != change.after:
        raise ToolError(
            "conflict", f"'{path}' was changed after its last edit; not undoing it (that would lose those changes)"
        )
    with op_errors(path):
        if change.before is None:
            await ctx.client.remove(path)
        else:
            await ctx.client.write_file(path, change.before, expected_sha256=change.after or "")
    changes.drop(path)
    before_text = decode(current or b"")
    after_text = decode(change.before or b"")
    restored = "removed it (it did not exist before)" if change.before is None else "restored its previous content"
    data = change_data(path, before_text, after_text, None if change.before is None else sha256_hex(change.before))
    return ToolResult.success(f"Reverted the last change to '{path}': {restored}", data)
