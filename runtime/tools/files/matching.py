"""Locating the text an edit replaces: exact, then whitespace-normalised, then fuzzy.

Stage 1 finds ``old`` verbatim (in a CRLF file, with its newlines as CRLF). Stage 2 compares
line by line with every run of whitespace collapsed to one space, so indentation, tabs versus
spaces and trailing blanks do not matter. Stage 3 (only when asked) slides a window of as many
lines as ``old`` has over the file and scores each window with the normalised Levenshtein
similarity (rapidfuzz); the best window at or above the threshold wins.

A match found by stage 2 or 3 covers whole tokens of the file and brings its own replacement
text: the new text re-indented the way the matched lines are (when the agent's indentation
differed) and with the file's newline convention.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from rapidfuzz.distance import Levenshtein

from caisson.tools.text import dominant_newline

Stage = Literal["exact", "whitespace", "fuzzy"]
# How seed 000 names the stages in its result text.
STAGE_NAMES: dict[str, str] = {"exact": "Exact", "whitespace": "WhitespaceInsensitive", "fuzzy": "Fuzzy"}
WHITESPACE_SIMILARITY = 0.95
_TOKEN = re.compile(r"\S+")
_INDENT = re.compile(r"[ \t]*")


@dataclass(frozen=True)
class Match:
    start: int
    end: int
    stage: Stage
    similarity: float
    replacement: str


@dataclass(frozen=True)
class Search:
    matches: list[Match]
    # Best fuzzy score seen and its 1-based line, for a helpful "not found".
    best_similarity: float = 0.0
    best_line: int = 0


class _Lines:
    """Line geometry of a text: start, content end (before \\r\\n / \\n) and end of each line."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.starts: list[int] = []
        self.content_ends: list[int] = []
        self.ends: list[int] = []
        pos = 0
        n = len(text)
        while pos < n:
            nl = text.find("\n", pos)
            end = n if nl < 0 else nl + 1
            content_end = nl if nl >= 0 else n
            if content_end > pos and text[content_end - 1] == "\r":
                content_end -= 1
            self.starts.append(pos)
            self.content_ends.append(content_end)
            self.ends.append(end)
            pos = end
        self.norm = [" ".join(self.raw(i).split()) for i in range(len(self.starts))]

    def raw(self, i: int) -> str:
        return self.text[self.starts[i] : self.content_ends[i]]

    def __len__(self) -> int:
        return len(self.starts)


def _norm_start(raw: str, col: int) -> int:
    """Raw index where normalised column ``col`` begins (a collapsed space maps to its run)."""
    pos = 0
    for m in _TOKEN.finditer(raw):
        length = m.end() - m.start()
        if col < pos + length:
            return m.start() + col - pos
        pos += length
        if col == pos:
            return m.end()
        pos += 1
    return len(raw)


def _norm_end(raw: str, col: int) -> int:
    """Raw index just after normalised column ``col - 1`` (a collapsed space takes its whole run)."""
    if col == 0:
        return 0
    pos = 0
    tokens = list(_TOKEN.finditer(raw))
    for k, m in enumerate(tokens):
        length = m.end() - m.start()
        if col <= pos + length:
            return m.start() + col - pos
        pos += length + 1
        if col == pos and k + 1 < len(tokens):
            return tokens[k + 1].start()
    return len(raw)


@dataclass(frozen=True)
class _Needle:
    lines: list[str]  # without terminators
    norm: list[str]
    trailing_newline: bool
    lead_ws: bool
    trail_ws: bool


def _needle(old: str) -> _Needle | None:
    lines = old.split("\n")
    trailing = len(lines) > 1 and lines[-1] == ""
    if trailing:
        lines.pop()
    lines = [line.removesuffix("\r") for line in lines]
    norm = [" ".join(line.split()) for line in lines]
    if not any(norm):
        return None
    return _Needle(lines, norm, trailing, lines[0][:1].isspace(), lines[-1][-1:].isspace())


def _region(lines: _Lines, needle: _Needle, first: int, a: int, last: int, b: int) -> tuple[int, int]:
    """Raw [start, end) of a match from normalised column ``a`` of line ``first`` to ``b`` of ``last``."""
    raw_first = lines.raw(first)
    start = _norm_start(raw_first, a) if a or not needle.lead_ws else 0
    raw_last = lines.raw(last)
    if b == len(lines.norm[last]):
        if needle.trailing_newline:
            return lines.starts[first] + start, lines.ends[last]
        end = len(raw_last) if needle.trail_ws else _norm_end(raw_last, b)
    else:
        end = _norm_end(raw_last, b)
    return lines.starts[first] + start, lines.starts[last] + end


def _reindent(new: str, needle: _Needle, lines: _Lines, first: int, whole_first_line: bool) -> str:
    """Give ``new`` the matched lines' indentation where the agent's differed from the file's."""
    mapping: dict[str, str] = {}
    for k, line in enumerate(needle.lines):
        if first + k >= len(lines) or not line.strip():
            continue
        theirs = _INDENT.match(line).group()  # type: ignore[union-attr]
        ours = _INDENT.match(lines.raw(first + k)).group()  # type: ignore[union-attr]
        mapping.setdefault(theirs, ours)
    if all(k == v for k, v in mapping.items()):
        return new
    base_theirs, base_ours = next(iter(mapping.items()))
    out = []
    for k, line in enumerate(new.split("\n")):
        if (k == 0 and not whole_first_line) or not line.strip():
            out.append(line)
            continue
        indent = _INDENT.match(line).group()  # type: ignore[union-attr]
        if indent in mapping:
            line = mapping[indent] + line[len(indent) :]
        elif indent.startswith(base_theirs):
            line = base_ours + line[len(base_theirs) :]
        out.append(line)
    return "\n".join(out)


def _with_newlines(text: str, newline: str) -> str:
    if newline == "\r\n" and "\r" not in text:
        return text.replace("\n", "\r\n")
    return text


def _exact(content: str, old: str, new: str) -> list[Match]:
    found = []
    pos = content.find(old)
    while pos >= 0:
        found.append(Match(pos, pos + len(old), "exact", 1.0, new))
        pos = content.find(old, pos + len(old))
    return found


def _whitespace(lines: _Lines, needle: _Needle, new: str, newline: str) -> list[Match]:
    found: list[Match] = []
    n = len(needle.norm)
    count = len(lines)
    i = 0
    while i + n <= count:
        hit: tuple[int, int] | None = None
        if n == 1:
            target = needle.norm[0]
            col = lines.norm[i].find(target)
            while col >= 0:
                b = col + len(target)
                if not needle.trailing_newline or b == len(lines.norm[i]):
                    found.append(_whitespace_match(lines, needle, new, newline, i, col, i, b))
                col = lines.norm[i].find(target, col + max(len(target), 1))
        elif (
            lines.norm[i].endswith(needle.norm[0])
            and all(lines.norm[i + k] == needle.norm[k] for k in range(1, n - 1))
            and (
                lines.norm[i + n - 1] == needle.norm[-1]
                if needle.trailing_newline
                else lines.norm[i + n - 1].startswith(needle.norm[-1])
            )
        ):
            hit = (len(lines.norm[i]) - len(needle.norm[0]), len(needle.norm[-1]))
        if hit is not None:
            found.append(_whitespace_match(lines, needle, new, newline, i, hit[0], i + n - 1, hit[1]))
            i += n
        else:
            i += 1
    return found


def _whitespace_match(
    lines: _Lines, needle: _Needle, new: str, newline: str, first: int, a: int, last: int, b: int
) -> Match:
    start, end = _region(lines, needle, first, a, last, b)
    replacement = _reindent(new, needle, lines, first, a == 0 and needle.lead_ws)
    return Match(start, end, "whitespace", WHITESPACE_SIMILARITY, _with_newlines(replacement, newline))


def _fuzzy(lines: _Lines, needle: _Needle, new: str, newline: str, threshold: float) -> Search:
    n = len(needle.norm)
    query = " ".join(part for part in needle.norm if part)
    scores: list[tuple[float, int]] = []
    best, best_line = 0.0, 0
    for i in range(len(lines) - n + 1):
        window = " ".join(part for part in lines.norm[i : i + n] if part)
        score = Levenshtein.normalized_similarity(query, window)
        if score > best:
            best, best_line = score, i + 1
        if score >= threshold:
            scores.append((score, i))
    if not scores:
        return Search([], best, best_line)
    top = max(score for score, _ in scores)
    starts: list[int] = []
    for score, i in scores:
        if score >= top - 1e-12 and all(abs(i - j) >= n for j in starts):
            starts.append(i)
    matches = []
    for i in starts:
        last = i + n - 1
        start, end = _region(lines, needle, i, 0, last, len(lines.norm[last]))
        replacement = _reindent(new, needle, lines, i, needle.lead_ws)
        matches.append(Match(start, end, "fuzzy", top, _with_newlines(replacement, newline)))
    return Search(matches, best, best_line)


def find(
    content: str,
    old: str,
    new: str,
    *,
    whitespace: bool = True,
    fuzzy: bool = False,
    threshold: float = 0.7,
) -> Search:
    """Every match of ``old`` at the first stage that finds any (fuzzy: the best window)."""
    newline = dominant_newline(content)
    if newline == "\r\n" and "\r" not in old:
        exact = _exact(content, old.replace("\n", "\r\n"), _with_newlines(new, newline))
    else:
        exact = _exact(content, old, new)
    if exact:
        return Search(exact)
    needle = _needle(old) if (whitespace or fuzzy) else None
    if needle is None:
        return Search([])
    lines = _Lines(content)
    if whitespace:
        found = _whitespace(lines, needle, new, newline)
        if found:
            return Search(found)
    if fuzzy:
        return _fuzzy(lines, needle, new, newline, threshold)
    return Search([])
