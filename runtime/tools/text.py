"""Helpers shared by the file and search tools: text decoding, binary and image detection,
line handling, glob patterns, size formatting and daemon error translation."""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager
from difflib import SequenceMatcher
from functools import lru_cache
from typing import Any

from caisson.errors import OpError
from caisson.policy.paths import glob_translate
from caisson.tools.base import ToolError

# Extensions rejected before any byte is read (seed 000's list).
BINARY_EXTENSIONS = frozenset(
    [".zip", ".tar", ".gz", ".tgz", ".bz2", ".xz", ".7z", ".rar", ".exe", ".dll", ".so", ".dylib", ".a", ".lib", ".o", ".obj", ".class", ".jar", ".war", ".pyc", ".pyo", ".wasm", ".bin", ".dat", ".db", ".sqlite", ".sqlite3", ".png", ".jpg", ".jpeg", ".gif", ".bmp", ".ico", ".webp", ".tiff", ".mp3", ".mp4", ".avi", ".mov", ".mkv", ".wav", ".flac", ".ogg", ".pdf", ".doc", ".docx", ".xls", ".xlsx", ".ppt", ".pptx", ".odt", ".ods", ".odp"]
)
BINARY_SNIFF_BYTES = 4096


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def extension(path: str) -> str:
    return posixpath.splitext(path)[1].lower()


def is_binary_extension(path: str) -> bool:
    return extension(path) in BINARY_EXTENSIONS


# Every byte but the control bytes seed 000 counts (below TAB, and SO..US): deleting these leaves
# exactly the control bytes, counted in C rather than in a Python loop.
_NOT_CONTROL = bytes(b for b in range(256) if not (b < 9 or 13 < b < 32))


def is_binary_content(data: bytes) -> bool:
    """Seed 000's rule on the first 4 KB: a NUL byte, or more than 30 % control bytes."""
    sample = data[:BINARY_SNIFF_BYTES]
    if not sample:
        return False
    if b"\0" in sample:
        return True
    control = len(sample.translate(None, _NOT_CONTROL))
    return control / len(sample) > 0.3


def image_media_type(head: bytes) -> str | None:
    """PNG, JPEG, GIF or WebP, by magic number (an extension can lie)."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


def decode(data: bytes) -> str:
    """Text that encodes back to the same bytes, invalid UTF-8 included (surrogateescape)."""
    return data.decode("utf-8", "surrogateescape")


def encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def printable(text: str) -> str:
    """``text`` with undecodable bytes shown as U+FFFD, safe for JSON."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


# Characters a terminal or a reader would act on or misread in a name: controls (newlines among
# them), bidi overrides and other invisible format characters, separators other than the space.
_UNSEEN = frozenset({"Cc", "Cf", "Zl", "Zp", "Zs", "Co", "Cs"})
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\"}


def shown_name(name: str) -> str:
    """A file name as listings and search results show it: what could make it look like another
    name, or like more than one line, written as an escape (``\\n``, ``\\u202e``; an undecodable
    byte as ``\\xff``; a backslash doubled, so that no name can pass for another's escape)."""
    if name.isprintable() and "\\" not in name:
        return name
    out = []
    for c in name:
        code = ord(c)
        if 0xDC80 <= code <= 0xDCFF:  # an undecodable byte, kept by surrogateescape
            out.append(f"\\x{code - 0xDC00:02x}")
        elif c in _NAMED:
            out.append(_NAMED[c])
        elif _unseen(c):
            out.append(f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}")
        else:
            out.append(c)
    return "".join(out)


def _unseen(c: str) -> bool:
    return c != " " and unicodedata.category(c) in _UNSEEN


# What JSON text may still carry raw once json.dumps has escaped quotes, backslashes and C0
# controls: anything outside printable ASCII (a layout newline of indent= is not inside a string).
_JSON_CANDIDATE = re.compile(r"[^\x20-\x7e\n]")


def _json_escape(match: re.Match[str]) -> str:
    c = match.group()
    if not _unseen(c):
        return c
    code = ord(c)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000  # JSON spells a character beyond the BMP as its UTF-16 surrogate pair
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def shown_json(value: Any, *, indent: int | None = None) -> str:
    """``value`` as the JSON text a tool shows: names and text in any script stay readable,
    while every character :func:`shown_name` escapes is written as a JSON ``\\u`` escape, so
    the text parses back to exactly ``value`` but cannot display as something it is not."""
    text = json.dumps(value, ensure_ascii=False, indent=indent, default=str)
    return _JSON_CANDIDATE.sub(_json_escape, text)


def split_lines(text: str) -> list[str]:
    """Lines without terminators: split at \\n, a trailing \\r dropped, no empty last line."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines] if "\r" in text else lines


def dominant_newline(text: str) -> str:
    crlf = text.count("\r\n")
    return "\r\n" if crlf and crlf * 2 >= text.count("\n") else "\n"


def shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def human_size(size: int) -> str:
    """Seed 000's "human-readable file size (KB/MB/GB)": 2.9KB, 512B."""
    for unit, scale in (("GB", 1024**3), ("MB", 1024**2), ("KB", 1024)):
        if size >= scale:
            return f"{size / scale:.1f}{unit}"
    return f"{size}B"


def permissions(mode: int) -> str:
    """``-rw-r--r--`` from an st_mode."""
    kind = {0o040000: "d", 0o120000: "l"}.get(mode & 0o170000, "-")
    bits = "".join(
        flag if mode & mask else "-"
        for flag, mask in zip("rwxrwxrwx", (0o400, 0o200, 0o100, 0o040, 0o020, 0o010, 0o004, 0o002, 0o001), strict=True)
    )
    return kind + bits


# ---- globs ---------------------------------------------------------------------------


@lru_cache(maxsize=256)
def glob_regex(pattern: str) -> re.Pattern[str]:
    """A glob matched against a whole relative path: ``*`` and ``?`` stop at ``/``, ``**``
    spans directories, ``[abc]``, ``[!abc]`` and ``{a,b}`` (nestable) as in shells."""
    try:
        return re.compile(glob_translate(pattern), re.DOTALL)
    except re.error as exc:
        raise ToolError("invalid_pattern", f"Invalid glob pattern '{pattern}': {exc}") from None


class GitGlob:
    """One glob with gitignore/ripgrep ``--glob`` semantics: ``!`` negates, a trailing ``/``
    matches directories only, a pattern without ``/`` matches the name at any depth, one with a
    ``/`` is anchored at the search root."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.negated = pattern.startswith("!")
        body = pattern[1:] if self.negated else pattern
        self.dir_only = body.endswith("/")
        body = body.rstrip("/")
        if "/" not in body:
            body = "**/" + body
        self.regex = glob_regex(body.lstrip("/"))

    def matches(self, rel: str, is_dir: bool) -> bool:
        return (is_dir or not self.dir_only) and self.regex.fullmatch(rel) is not None


# ---- daemon errors -----------------------------------------------------------------------


def tool_error(exc: OpError, path: str) -> ToolError:
    """A daemon refusal as a tool error an agent can act on."""
    messages = {
        "not_found": f"File does not exist: {path}",
        "is_a_directory": f"Path is a directory: {path}",
        "not_a_directory": f"A parent of the path is not a directory: {path}",
        "permission_denied": f"Permission denied: {path}",
        "conflict": f"'{path}' changed since it was read; read it again and retry.",
    }
    return ToolError(exc.code, messages.get(exc.code, exc.message))


@contextmanager
def op_errors(path: str) -> Iterator[None]:
    try:
        yield
    except OpError as exc:
        raise tool_error(exc, path) from None


# ---- unified diffs -----------------------------------------------------------------------


def split_keepends(text: str) -> list[str]:
    """Lines with their terminators; only \\n ends a line (unlike str.splitlines)."""
    if not text:
        return []
    lines = text.split("\n")
    last = lines.pop()
    out = [line + "\n" for line in lines]
    if last:
        out.append(last)
    return out


def _common_prefix(a: list[str], b: list[str]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _common_suffix(a: list[str], b: list[str], prefix: int) -> int:
    n = min(len(a), len(b)) - prefix
    i = 0
    while i < n and a[-1 - i] == b[-1 - i]:
        i += 1
    return i


def _range(start: int, length: int) -> str:
    first = start + 1 if length else start
    return str(first) if length == 1 else f"{first},{length}"


def unified_diff(a: str, b: str, a_label: str = "original", b_label: str = "modified", context: int = 3) -> str:
    """A git-style unified diff ("" when equal), with "\\ No newline at end of file" markers.

    Only the part between the common prefix and suffix goes through difflib, so a small edit
    of a large file costs little."""
    if a == b:
        return ""
    al, bl = split_keepends(a), split_keepends(b)
    prefix = _common_prefix(al, bl)
    suffix = _common_suffix(al, bl, prefix)
    lo = max(0, prefix - context)
    a_hi, b_hi = len(al) - max(0, suffix - context), len(bl) - max(0, suffix - context)
    matcher = SequenceMatcher(None, al[lo:a_hi], bl[lo:b_hi], autojunk=False)
    out = [f"--- {a_label}\n", f"+++ {b_label}\n"]
    for group in matcher.get_grouped_opcodes(context):
        i1, j1 = group[0][1] + lo, group[0][3] + lo
        i2, j2 = group[-1][2] + lo, group[-1][4] + lo
        out.append(f"@@ -{_range(i1, i2 - i1)} +{_range(j1, j2 - j1)} @@\n")
        for tag, a1, a2, b1, b2 in group:
            if tag == "equal":
                out.extend(_diff_line(" ", line) for line in al[a1 + lo : a2 + lo])
                continue
            out.extend(_diff_line("-", line) for line in al[a1 + lo : a2 + lo])
            out.extend(_diff_line("+", line) for line in bl[b1 + lo : b2 + lo])
    return "".join(out)


def _diff_line(tag: str, line: str) -> str:
    return f"{tag}{line}" if line.endswith("\n") else f"{tag}{line}\n\\ No newline at end of file\n"


def changed_lines(a: str, b: str) -> tuple[int, int]:
    """1-based [first, last] lines of ``b`` that differ from ``a`` (a deletion: the line after it)."""
    al, bl = split_keepends(a), split_keepends(b)
    prefix = _common_prefix(al, bl)
    suffix = _common_suffix(al, bl, prefix)
    first = prefix + 1
    return first, max(first, len(bl) - suffix)
