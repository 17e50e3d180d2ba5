"""read_file, write_file and delete_file.

read_file numbers lines the way seed 000 (Agent Air) shows them, refuses binary and secret
files, returns images as base64 and gives every read a version token (the content's SHA-256)
that write_file and the edit tools accept as ``expected_version``.
"""

from __future__ import annotations

import base64
import binascii
import operator
import posixpath
from typing import TYPE_CHECKING, Literal

from pydantic import Field, model_validator
from rapidfuzz import fuzz

from caisson.errors import OpError
from caisson.policy import Level
from caisson.tools.base import NotPlain, ToolError, ToolInput, ToolResult, tool
from caisson.tools.files.edit import UNDO_MAX_FILE, record_change
from caisson.tools.text import (
    BINARY_SNIFF_BYTES,
    image_media_type,
    is_binary_content,
    is_binary_extension,
    op_errors,
    sha256_hex,
    shown_name,
    split_lines,
    tool_error,
)

if TYPE_CHECKING:
    from caisson.tools.context import Probe, ToolContext

# Files up to this size are fetched whole (total line count and hash known); larger ones are
# read chunk by chunk only as far as the requested lines.
FULL_READ_BYTES = 32 * 1024 * 1024
# Read whole in the first round trip when the file turns out no larger.
FAST_READ_BYTES = 256 * 1024
STREAM_CHUNK = 4 * 1024 * 1024
MAX_BASE64_BYTES = 20 * 1024 * 1024
DEFAULT_MAX_WRITE = 10 * 1024 * 1024
SUMMARY_THRESHOLD_LINES = 500
SUMMARY_PREVIEW_LINES = 50
SUGGESTION_SCAN_ENTRIES = 5000


# ---- read_file -----------------------------------------------------------------------------


class ReadFileInput(ToolInput):
    path: str = Field(description="File to read (absolute, or relative to the working directory)")
    offset: int = Field(0, ge=0, description="Line to start from (0-based)")
    limit: int = Field(2000, ge=1, description="Maximum lines to return")
    start_line: int | None = Field(None, ge=1, description="First line to return (1-based); overrides offset")
    end_line: int | None = Field(None, ge=1, description="Last line to return (1-based, inclusive); overrides limit")
    max_line_chars: int = Field(2000, ge=1, description="Longer lines are cut and end in '...'")
    max_output_bytes: int = Field(50 * 1024, ge=1, description="Cap on the returned text")
    max_file_bytes: int | None = Field(None, ge=1, description="Refuse files larger than this")
    line_numbers: bool = Field(True, description="Number the lines; false returns the raw text of the range")
    encoding: Literal["text", "base64", "auto"] = Field(
        "text", description="text: refuse binary files; base64: the raw bytes; auto: base64 only for binary files"
    )
    images: bool = Field(True, description="Return PNG, JPEG, GIF and WebP images as base64 with their media type")
    large_file_summary: bool = Field(
        False, description="For a read without a range of a file over 500 lines: line count and a 50-line preview"
    )
    directory: Literal["list", "error"] = Field("list", description="A directory: list its entries, or fail")

    @model_validator(mode="after")
    def _range(self) -> ReadFileInput:
        if self.start_line is not None and self.end_line is not None and self.end_line < self.start_line:
            raise ValueError("end_line is before start_line")
        return self

    @property
    def ranged(self) -> bool:
        return bool(self.model_fields_set & {"offset", "limit", "start_line", "end_line"})


async def _suggestions(ctx: ToolContext, path: str) -> list[str]:
    """Up to three existing paths whose names resemble the missing one's."""
    name = posixpath.basename(path).lower()
    parent = posixpath.dirname(path)
    candidates: dict[str, float] = {}
    try:
        for entry in await ctx.client.list_dir(parent):
            candidates[posixpath.join(parent, entry.name)] = 0.0
    except OpError:
        pass
    try:
        walked = await ctx.client.walk(ctx.cwd, max_entries=SUGGESTION_SCAN_ENTRIES)
        for walked_entry in walked.entries:
            if walked_entry.type == "file":
                candidates.setdefault(posixpath.join(ctx.cwd, walked_entry.path), 0.0)
    except OpError:
        pass
    scored = []
    for candidate in candidates:
        other = posixpath.basename(candidate).lower()
        score = fuzz.ratio(name, other)
        if name and other and (name in other or other in name):
            score = max(score, 80.0)
        # The same directory as asked for is the likelier intent.
        if posixpath.dirname(candidate) == parent:
            score += 5
        if score >= 60:
            scored.append((-score, candidate))
    return [c for _, c in sorted(scored)[:3]]


# Line-number prefixes of the first lines of files, made once: formatting each anew was most of
# the host's time on a read.
_PREFIX_CACHE = 10_000
_PREFIXES: list[str] = []


def _prefixes(first: int, count: int) -> list[str]:
    """``"00042| "`` for lines ``first`` to ``first + count - 1``."""
    end = first + count
    if len(_PREFIXES) < min(end, _PREFIX_CACHE):
        _PREFIXES.extend(f"{n:05}| " for n in range(len(_PREFIXES), min(end, _PREFIX_CACHE)))
    cached = _PREFIXES[first:end]
    return cached + [f"{n:05}| " for n in range(first + len(cached), end)]


def _numbered(lines: list[str], first: int, args: ReadFileInput) -> tuple[list[str], bool]:
    """Seed 000's ``00042| text`` lines within the byte cap; whether the cap cut the output."""
    cut = args.max_line_chars
    shown = lines
    if lines and max(map(len, lines)) > cut:
        shown = [line if len(line) <= cut else line[:cut] + "..." for line in lines]
    formatted = list(map(operator.add, _prefixes(first, len(shown)), shown)) if args.line_numbers else shown
    # Usually everything fits: one encode of the whole text instead of one per line.
    if len("\n".join(formatted).encode("utf-8", "replace")) + 1 <= args.max_output_bytes:
        return formatted, False
    out: list[str] = []
    used = 0
    for row in formatted:
        size = len(row.encode("utf-8", "replace")) + 1
        if used + size > args.max_output_bytes:
            return out, True
        out.append(row)
        used += size
    return out, False


async def _read_prefix(ctx: ToolContext, path: str, size: int, lines_needed: int) -> tuple[bytes, bool]:
    """Enough of a large file for ``lines_needed`` lines; whether that is all of it."""
    parts: list[bytes] = []
    offset = newlines = 0
    while offset < size:
        piece = await ctx.client.read_range(path, offset, STREAM_CHUNK)
        parts.append(piece.data)
        offset += len(piece.data)
        newlines += piece.data.count(b"\n")
        if piece.eof or not piece.data:
            return b"".join(parts), True
        if newlines > lines_needed:
            return b"".join(parts), False
    return b"".join(parts), True


def _directory_listing(path: str, names: list[tuple[str, bool]]) -> ToolResult:
    entries = [f"{name}/" if is_dir else name for name, is_dir in sorted(names)]
    text = "\n".join(f"{shown_name(name)}/" if is_dir else shown_name(name) for name, is_dir in sorted(names))
    return ToolResult.success(text, {"path": path, "type": "directory", "entries": entries})


@tool(
    "read_file",
    ReadFileInput,
    level=Level.SAFE,
    access="read",
    snippet="Read a file with line numbers (offset/limit or a line range); images come back as base64",
    paths=lambda a: [a.path],
    prefetch=FAST_READ_BYTES,
)
async def read_file(ctx: ToolContext, args: ReadFileInput) -> ToolResult:
    # Secret files are refused by the permission policy (configurable there), before this runs.
    path = ctx.resolve(args.path)
    # Most reads are of small regular files, read whole by the dispatcher's probe of the path
    # (or else by one round trip); only anything else (missing, a directory, a device, a large
    # file) asks what it is.
    probe = ctx.probe(path)
    if probe is not None and probe.eof and probe.head is not None:
        return await _read_regular(ctx, path, len(probe.head), probe.head, args)
    if probe is None:
        try:
            first = await ctx.client.read_range(path, 0, FAST_READ_BYTES)
        except OpError:
            first = None
        if first is not None and first.eof:
            return await _read_regular(ctx, path, first.size, first.data, args)
    with op_errors(path):
        st = await ctx.stat(path)
    if not st.exists:
        suggestions = await _suggestions(ctx, path)
        message = f"File not found: {path}"
        if suggestions:
            message += "\n\nDid you mean one of these?\n" + "\n".join(suggestions)
        raise ToolError("not_found", message, {"suggestions": suggestions})
    if st.type == "dir":
        if args.directory == "error":
            raise ToolError("is_a_directory", f"Cannot read directory: {path}. Use a file listing tool instead.")
        with op_errors(path):
            entries = await ctx.client.list_dir(path)
        return _directory_listing(path, [(e.name, e.type == "dir") for e in entries])
    if st.type != "file":
        raise ToolError("not_a_file", f"Not a regular file: {path}")
    return await _read_regular(ctx, path, st.size, None, args)


async def _read_regular(
    ctx: ToolContext, path: str, size: int, data: bytes | None, args: ReadFileInput
) -> ToolResult:
    """A regular file of ``size`` bytes as the agent asked for it; ``data`` if already read whole."""
    if args.max_file_bytes is not None and size > args.max_file_bytes:
        raise ToolError("too_large", f"File content exceeds maximum allowed size ({args.max_file_bytes} bytes)")
    with op_errors(path):
        if data is None and size <= FULL_READ_BYTES:
            data = await ctx.client.read_file(path)
        head = (
            data[:BINARY_SNIFF_BYTES]
            if data is not None
            else (await ctx.client.read_range(path, 0, BINARY_SNIFF_BYTES)).data
        )
    media_type = image_media_type(head) if args.images else None
    binary = is_binary_extension(path) or is_binary_content(head)
    if media_type or args.encoding == "base64" or (binary and args.encoding == "auto"):
        return await _read_base64(ctx, path, size, data, media_type)
    if binary:
        raise ToolError("binary_file", f"Cannot read binary file: {path}")
    return await _read_text(ctx, path, size, data, args)


async def _read_base64(
    ctx: ToolContext, path: str, size: int, data: bytes | None, media_type: str | None
) -> ToolResult:
    if size > MAX_BASE64_BYTES:
        raise ToolError("too_large", f"File content exceeds maximum allowed size ({MAX_BASE64_BYTES} bytes)")
    if data is None:
        with op_errors(path):
            data = await ctx.client.read_file(path)
    encoded = base64.b64encode(data).decode("ascii")
    result = {"path": path, "size": len(data), "version": sha256_hex(data), "encoding": "base64", "content": encoded}
    if media_type:
        result.update(type="image", media_type=media_type, data=encoded)
        return ToolResult.success(f"Image file: {path} ({media_type}, {len(data)} bytes)", result)
    return ToolResult.success(encoded, {**result, "type": "binary"})


async def _read_text(ctx: ToolContext, path: str, size: int, data: bytes | None, args: ReadFileInput) -> ToolResult:
    if args.start_line is not None or args.end_line is not None:
        start = (args.start_line or 1) - 1
        limit = (args.end_line - start) if args.end_line is not None else args.limit
    else:
        start, limit = args.offset, args.limit
    summary = args.large_file_summary and not args.ranged
    complete = data is not None
    with op_errors(path):
        if data is None:
            data, complete = await _read_prefix(ctx, path, size, start + max(limit, SUMMARY_PREVIEW_LINES))
            version = (await ctx.client.read_range(path, 0, 0, hash=True)).sha256
        else:
            version = sha256_hex(data)
    lines = split_lines(data.decode("utf-8", "replace"))
    total = len(lines) if complete else None
    base = {"path": path, "type": "text", "size": size, "version": version, "total_lines": total}

    if summary and (total is None or total > SUMMARY_THRESHOLD_LINES):
        shown, _ = _numbered(lines[:SUMMARY_PREVIEW_LINES], 1, args)
        count = f"{total} lines" if total is not None else f"more than {len(lines)} lines"
        note = (
            f"(Large file: {count}. Showing a {SUMMARY_PREVIEW_LINES}-line preview; "
            "read a section with offset/limit or start_line/end_line.)"
        )
        text = "<file>\n" + "\n".join(shown) + f"\n\n{note}\n</file>"
        return ToolResult.success(
            text,
            {**base, "summary": True, "start_line": 1, "end_line": len(shown)},
            truncated=True,
            truncation={"reason": "summary", "next_offset": len(shown), "total_lines": total},
        )

    first = min(start, len(lines))
    selected = lines[first : first + limit]
    shown, cut_by_bytes = _numbered(selected, first + 1, args)
    last = first + len(shown)
    has_more = cut_by_bytes or total is None or total > last
    data_out = {**base, "start_line": first + 1, "end_line": last, "lines": len(shown), "has_more": has_more}
    truncation = None
    if has_more:
        truncation = {"reason": "bytes" if cut_by_bytes else "lines", "next_offset": last, "total_lines": total}
    if not args.line_numbers:
        return ToolResult.success("\n".join(shown), data_out, truncated=has_more, truncation=truncation)
    if cut_by_bytes:
        note = f"(Output truncated at {args.max_output_bytes} bytes. Use 'offset' parameter to read beyond line {last})"
    elif total is None:
        note = f"(File has more lines. Use 'offset' parameter to read beyond line {last})"
    elif has_more:
        note = f"(File has {total} total lines. Use 'offset' parameter to read beyond line {last})"
    else:
        note = f"(End of file - {total} total lines)"
    text = "<file>\n" + "\n".join(shown) + f"\n\n{note}\n</file>"
    return ToolResult.success(text, data_out, truncated=has_more, truncation=truncation)


# ---- write_file ----------------------------------------------------------------------------


class WriteFileInput(ToolInput):
    path: str = Field(description="File to write (absolute, or relative to the working directory)")
    content: str = Field(description="The new content")
    encoding: Literal["utf-8", "base64"] = Field("utf-8", description="How content is encoded")
    create_directories: bool = Field(True, description="Create missing parent directories")
    expected_version: str | None = Field(
        None, description='Version from read_file: write only if the file is unchanged ("" = must not exist)'
    )
    ensure_trailing_newline: bool = Field(False, description="Append a newline when the content lacks one")
    max_bytes: int = Field(DEFAULT_MAX_WRITE, ge=0, description="Refuse content larger than this")


async def _current(ctx: ToolContext, path: str, probe: Probe | None) -> tuple[bool, bytes | None, str, bool]:
    """exists, content (when small enough to keep for undo), its sha256 ("" if missing), kept;
    from the dispatcher's ``probe`` of the path where it tells."""
    if probe is not None and probe.eof and probe.head is not None:
        return True, probe.head, sha256_hex(probe.head), True
    with op_errors(path):
        st = probe.stat if probe is not None else await ctx.client.stat(path)
        if not st.exists:
            return False, None, "", True
        if st.type == "dir":
            raise ToolError("is_a_directory", f"Path is a directory: {path}")
        if st.type != "file":
            raise ToolError("not_a_file", f"Not a regular file: {path}")
        if st.size <= UNDO_MAX_FILE:
            data = await ctx.client.read_file(path)
            return True, data, sha256_hex(data), True
        digest = (await ctx.client.read_range(path, 0, 0, hash=True)).sha256 or ""
        return True, None, digest, False


@tool(
    "write_file",
    WriteFileInput,
    level=Level.CAUTIOUS,
    access="write",
    snippet="Create or overwrite a file (parent directories are created)",
    paths=lambda a: [a.path],
    prefetch=FAST_READ_BYTES,
    plain=True,
)
async def write_file(ctx: ToolContext, args: WriteFileInput) -> ToolResult:
    path = ctx.resolve(args.path)
    if args.encoding == "base64":
        try:
            payload = base64.b64decode(args.content, validate=True)
        except binascii.Error as exc:
            raise ToolError("invalid_arguments", f"content is not valid base64: {exc}") from None
    else:
        content = args.content
        if args.ensure_trailing_newline and content and not content.endswith("\n"):
            content += "\n"
        try:
            payload = content.encode("utf-8")
        except UnicodeEncodeError:
            raise ToolError("invalid_arguments", "content is not valid Unicode (it has a lone surrogate)") from None
    if len(payload) > args.max_bytes:
        raise ToolError("too_large", f"Content is {len(payload)} bytes, over the limit of {args.max_bytes} bytes")
    if ctx.plain:
        return await _write_plain(ctx, path, payload, args)
    # Without an expected version the caller means "overwrite": a change that lands between
    # our read (kept for undo) and our write is retried, never silently lost from history.
    probe = ctx.probe(path)
    for _ in range(3):
        existed, before, digest, kept = await _current(ctx, path, probe)
        probe = None  # a retry looks again
        if args.expected_version is not None and args.expected_version != digest:
            detail = "already exists" if args.expected_version == "" else "has changed since that version was read"
            raise ToolError("conflict", f"'{path}' {detail}; nothing was written.", {"version": digest or None})
        try:
            result = await ctx.client.write_file(path, payload, expected_sha256=digest, parents=args.create_directories)
        except OpError as exc:
            if exc.code == "conflict" and args.expected_version is None:
                continue
            if exc.code == "not_found" and not args.create_directories:
                raise ToolError("not_found", f"Parent directory does not exist: {posixpath.dirname(path)}") from None
            raise tool_error(exc, path) from None
        record_change(ctx, path, before, result.sha256, kept=kept)
        return _written(path, existed, len(payload), result.sha256)
    raise ToolError("conflict", f"'{path}' kept changing while it was being written; nothing was written.")


async def _write_plain(ctx: ToolContext, path: str, payload: bytes, args: WriteFileInput) -> ToolResult:
    """The whole tool in one round trip: the write refuses a path that is not plain, and
    returns what it replaced for undo. A refusal, a version conflict (whose answer needs the
    current version) or a directory there goes back to the dispatcher, which looks first."""
    try:
        result = await ctx.client.write_file(
            path, payload, expected_sha256=args.expected_version, parents=args.create_directories,
            plain=True, keep_old=UNDO_MAX_FILE,
        )
    except OpError as exc:
        if exc.code in ("not_plain", "conflict", "is_a_directory"):
            raise NotPlain(exc.message) from None
        if exc.code == "not_found" and not args.create_directories:
            raise ToolError("not_found", f"Parent directory does not exist: {posixpath.dirname(path)}") from None
        raise tool_error(exc, path) from None
    existed = bool(result.old_sha256)  # "": nothing was replaced, and undo removes the file
    record_change(ctx, path, result.old, result.sha256, kept=not existed or result.old is not None)
    return _written(path, existed, len(payload), result.sha256)


def _written(path: str, existed: bool, size: int, version: str) -> ToolResult:
    action = "overwrote" if existed else "created"
    return ToolResult.success(
        f"Successfully {action} '{path}' ({size} bytes)",
        {"path": path, "created": not existed, "bytes": size, "version": version},
    )


# ---- delete_file ---------------------------------------------------------------------------


class DeleteFileInput(ToolInput):
    path: str = Field(description="File to delete (absolute, or relative to the working directory)")


@tool(
    "delete_file",
    DeleteFileInput,
    level=Level.DANGEROUS,
    access="delete",
    snippet="Delete a file (undo_edit can restore it in this session)",
    paths=lambda a: [a.path],
)
async def delete_file(ctx: ToolContext, args: DeleteFileInput) -> ToolResult:
    path = ctx.resolve(args.path)
    with op_errors(path):
        st = await ctx.client.stat(path, follow=False)
    if not st.exists:
        raise ToolError("not_found", f"File does not exist: {path}")
    if st.type == "dir":
        raise ToolError("is_a_directory", f"Path is a directory: {path}; delete_file removes files only")
    before: bytes | None = None
    kept = st.type == "file" and st.size <= UNDO_MAX_FILE
    with op_errors(path):
        if kept:
            before = await ctx.client.read_file(path)
        await ctx.client.remove(path)
    record_change(ctx, path, before, None, kept=kept)
    return ToolResult.success(f"Successfully deleted '{path}'", {"path": path, "deleted": True})
