"""diff (unified diff of two strings or two files) and apply_patch (a unified diff applied
atomically: every hunk must apply, or nothing is written)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from pydantic import Field, model_validator

from caisson.errors import OpError
from caisson.policy import Level
from caisson.tools.base import ToolError, ToolInput, ToolResult, tool
from caisson.tools.files.edit import Loaded, check_version, commit, history, load_text
from caisson.tools.text import dominant_newline, op_errors, printable, split_keepends, unified_diff

if TYPE_CHECKING:
    from caisson.tools.context import ToolContext

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


# ---- diff ----------------------------------------------------------------------------------


class DiffInput(ToolInput):
    original: str = Field(description="Original text, or a file path when mode is 'files'")
    modified: str = Field(description="Modified text, or a file path when mode is 'files'")
    mode: Literal["strings", "files"] = Field("strings", description="Compare the strings or the two files")
    original_label: str | None = Field(None, description="Label of the original side (default: 'original' or the path)")
    modified_label: str | None = Field(None, description="Label of the modified side (default: 'modified' or the path)")
    context_lines: int = Field(3, ge=0, le=10_000, description="Unchanged lines shown around each change")


@tool(
    "diff",
    DiffInput,
    level=Level.SAFE,
    access="read",
    snippet="Unified diff of two strings or two files",
    paths=lambda a: [a.original, a.modified] if a.mode == "files" else [],
)
async def diff(ctx: ToolContext, args: DiffInput) -> ToolResult:
    if args.mode == "files":
        first, second = await load_text(ctx, args.original), await load_text(ctx, args.modified)
        a, b = first.text, second.text
        a_label, b_label = args.original_label or first.path, args.modified_label or second.path
    else:
        a, b = args.original, args.modified
        a_label, b_label = args.original_label or "original", args.modified_label or "modified"
    text = printable(unified_diff(a, b, a_label, b_label, args.context_lines))
    lines = text.splitlines()
    data = {
        "diff": text,
        "identical": not text,
        "added": sum(1 for line in lines if line.startswith("+") and not line.startswith("+++")),
        "removed": sum(1 for line in lines if line.startswith("-") and not line.startswith("---")),
    }
    return ToolResult.success(text or "(no differences)", data)


# ---- apply_patch ---------------------------------------------------------------------------


@dataclass
class Hunk:
    header: str
    old_start: int
    old_len: int
    new_start: int
    new_len: int
    # (tag, text without terminator, ends with a newline)
    lines: list[tuple[str, str, bool]] = field(default_factory=list)


@dataclass
class FilePatch:
    old_path: str | None
    new_path: str | None
    hunks: list[Hunk] = field(default_factory=list)


def _header_path(value: str) -> str | None:
    path = value.split("\t", 1)[0].strip()
    return None if path == "/dev/null" else path


def parse_patch(text: str) -> list[FilePatch]:
    """The file sections of a unified diff; lines outside hunks (``diff --git``, ``index``) are skipped."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    files: list[FilePatch] = []
    current: FilePatch | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            old, new = _header_path(line[4:]), _header_path(lines[i + 1][4:])
            # git's a/ and b/ prefixes (one side may be /dev/null).
            if (old or new) and (old is None or old.startswith("a/")) and (new is None or new.startswith("b/")):
                old, new = old and old[2:], new and new[2:]
            current = FilePatch(old, new)
            files.append(current)
            i += 2
            continue
        m = _HUNK.match(line)
        if m is None:
            i += 1
            continue
        if current is None:
            current = FilePatch(None, None)
            files.append(current)
        hunk = Hunk(line, int(m[1]), 1 if m[2] is None else int(m[2]), int(m[3]), 1 if m[4] is None else int(m[4]))
        number = len(current.hunks) + 1
        i += 1
        old_seen = new_seen = 0
        while i < len(lines) and (old_seen < hunk.old_len or new_seen < hunk.new_len or lines[i].startswith("\\")):
            body = lines[i]
            i += 1
            if body.startswith("\\"):
                if hunk.lines:
                    tag, last, _ = hunk.lines[-1]
                    hunk.lines[-1] = (tag, last, False)
                continue
            # Some tools strip the space of an empty context line.
            tag, content = (body[:1], body[1:]) if body else (" ", "")
            if tag not in " -+":
                raise ToolError("invalid_patch", f"Hunk {number} ({hunk.header}): unexpected line {body!r}")
            hunk.lines.append((tag, content.removesuffix("\r"), True))
            old_seen += tag != "+"
            new_seen += tag != "-"
        if old_seen != hunk.old_len or new_seen != hunk.new_len:
            raise ToolError(
                "invalid_patch",
                f"Hunk {number} ({hunk.header}) is incomplete: expected {hunk.old_len} old and {hunk.new_len} new "
                f"lines, found {old_seen} and {new_seen}",
            )
        current.hunks.append(hunk)
    files = [f for f in files if f.hunks]
    if not files:
        raise ToolError("invalid_patch", "The patch contains no hunks")
    return files


def _bare(line: str) -> str:
    return line.removesuffix("\n").removesuffix("\r")


def _locate(lines: list[str], old: list[str], expected: int, floor: int) -> int | None:
    """Where ``old`` occurs, trying ``expected`` first and then ever farther away."""
    last = len(lines) - len(old)
    if last < floor:
        return None
    if not old:
        return min(max(expected, floor), len(lines))
    for distance in range(max(expected - floor, last - expected) + 1):
        for at in (expected - distance, expected + distance):
            if floor <= at <= last and all(_bare(lines[at + k]) == text for k, text in enumerate(old)):
                return at
    return None


def apply_hunks(text: str, hunks: list[Hunk], label: str) -> str:
    """``text`` with every hunk applied (a hunk may have moved: its context decides where)."""
    lines = split_keepends(text)
    newline = dominant_newline(text) if text else "\n"
    out: list[str] = []
    pos = shift = 0
    for number, hunk in enumerate(hunks, 1):
        old = [t for tag, t, _ in hunk.lines if tag != "+"]
        stated = hunk.old_start - 1 if hunk.old_len else hunk.old_start
        at = _locate(lines, old, stated + shift, pos)
        if at is None:
            raise ToolError(
                "patch_failed",
                f"Hunk {number} ({hunk.header}) does not apply to {label}: its context and removed lines were not "
                f"found at or after line {pos + 1}. Nothing was changed.",
                {"hunk": number},
            )
        out.extend(lines[pos:at])
        j = at
        for tag, content, has_newline in hunk.lines:
            if tag == " ":
                out.append(lines[j])
                j += 1
            elif tag == "-":
                j += 1
            else:
                out.append(content + (newline if has_newline else ""))
        pos, shift = j, at - stated
    out.extend(lines[pos:])
    # A line that lost its final newline but is no longer last gets one back.
    for k in range(len(out) - 1):
        if not out[k].endswith("\n"):
            out[k] += newline
    return "".join(out)


class ApplyPatchInput(ToolInput):
    patch: str = Field(description="A unified diff (as produced by diff or git diff)")
    path: str | None = Field(None, description="File to patch; default: the file the patch names")
    expected_version: str | None = Field(None, description="Version from read_file; a changed file is not patched")
    dry_run: bool = Field(False, description="Check that the patch applies without writing")

    @model_validator(mode="after")
    def _not_empty(self) -> ApplyPatchInput:
        if not self.patch.strip():
            raise ValueError("patch is empty")
        return self


async def _load_or_new(ctx: ToolContext, path: str, creating: bool) -> Loaded:
    if creating:
        target = ctx.resolve(path)
        with op_errors(target):
            exists = (await ctx.stat(target)).exists
        if not exists:
            return Loaded(target, b"", "", "")
    return await load_text(ctx, path)


def patched_paths(args: ApplyPatchInput) -> list[str]:
    """The files a call writes, for the policy: ``path``, else every file the patch names."""
    if args.path:
        return [args.path]
    try:
        sections = parse_patch(args.patch)
    except ToolError:
        return []  # the handler refuses the patch before touching anything
    return [p for s in sections for p in (s.new_path or s.old_path,) if p]


@tool(
    "apply_patch",
    ApplyPatchInput,
    level=Level.CAUTIOUS,
    access="write",
    reads=True,
    snippet="Apply a unified diff; a hunk that does not apply fails the whole patch and nothing changes",
    paths=patched_paths,
)
async def apply_patch(ctx: ToolContext, args: ApplyPatchInput) -> ToolResult:
    sections = parse_patch(args.patch)
    if args.path is not None and len(sections) > 1:
        raise ToolError("invalid_patch", f"The patch changes {len(sections)} files; leave path out to apply all")
    planned: list[tuple[Loaded, str, int]] = []
    for section in sections:
        if section.new_path is None and section.old_path is not None:
            raise ToolError("invalid_patch", f"The patch deletes {section.old_path}; use delete_file for that")
        path = args.path or section.new_path or section.old_path
        if path is None:
            raise ToolError("invalid_patch", "The patch names no file; give path")
        loaded = await _load_or_new(ctx, path, creating=section.old_path is None)
        if len(sections) == 1:
            check_version(loaded, args.expected_version)
        planned.append((loaded, apply_hunks(loaded.text, section.hunks, loaded.path), len(section.hunks)))

    reports = []
    if not args.dry_run:
        done: list[tuple[Loaded, str]] = []
        try:
            for loaded, new_text, _ in planned:
                result = await commit(ctx, loaded, new_text)
                done.append((loaded, result.sha256))
        except (ToolError, OpError):
            await _roll_back(ctx, done)
            raise
    for loaded, new_text, hunks in planned:
        reports.append(
            {
                "path": loaded.path,
                "hunks": hunks,
                "created": not loaded.sha256,
                "diff": printable(unified_diff(loaded.text, new_text, loaded.path, loaded.path)),
            }
        )
    verb = "applies cleanly to" if args.dry_run else "Successfully applied patch to"
    lines = [f"{'Patch ' if args.dry_run else ''}{verb} '{r['path']}' ({r['hunks']} hunk(s))" for r in reports]
    return ToolResult.success("\n".join(lines), {"files": reports, "dry_run": args.dry_run})


async def _roll_back(ctx: ToolContext, done: list[tuple[Loaded, str]]) -> None:
    """Restore the files already patched when a later one failed (only where still ours)."""
    for loaded, written in reversed(done):
        history(ctx).drop(loaded.path)
        try:
            if loaded.sha256:
                await ctx.client.write_file(loaded.path, loaded.data, expected_sha256=written)
            elif (await ctx.client.read_range(loaded.path, 0, 0, hash=True)).sha256 == written:
                await ctx.client.remove(loaded.path)
        except OpError:
            continue
