"""Could a word's expansion name a path that a policy glob matches?

A word with glob characters or computed parts stands for a set of paths (its pattern, from
:attr:`Word.glob_pattern`: ``*``, ``?``, ``[...]`` active, backslash-escaped literals, ANY
for a computed part). A policy glob (``.env``, ``*.pem``, ``.git/**``) stands for another set.
:func:`may_match` decides whether the two sets share a path, by a search over pairs of
positions in the two patterns (the product of two small automata). Unsure cases answer yes.

Deliberately generous: ``*`` and ``?`` are taken to match a leading dot too (``dotglob``
can be on), and case is compared exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from .lexer import ANY

# Past this many pattern items, don't search: assume it may match.
_MAX_ITEMS = 2048


@dataclass(frozen=True)
class _Chars:
    """One character out of a set: a literal, ``?`` or a bracket expression."""

    members: frozenset[str]
    ranges: tuple[tuple[str, str], ...] = ()
    negate: bool = False
    slash: bool = False  # whether "/" belongs to the set (only for literal "/")

    def has(self, c: str) -> bool:
        if c == "/":
            return self.slash
        inside = c in self.members or any(lo <= c <= hi for lo, hi in self.ranges)
        return inside != self.negate

    def mentioned(self) -> set[str]:
        out = set(self.members)
        for lo, hi in self.ranges:
            for c in (lo, hi):
                out.update({c, chr(max(ord(c) - 1, 1)), chr(min(ord(c) + 1, 0x10FFFF))})
        return out


@dataclass(frozen=True)
class _Star:
    """Any run of characters; ``slash`` says whether "/" may be among them."""

    slash: bool


_Item = _Chars | _Star
_ANY_CHAR = _Chars(frozenset(), negate=True)
_FRESH = "\ue000"


def _literal(c: str) -> _Chars:
    return _Chars(frozenset({c}), slash=c == "/")


def _bracket(pattern: str, i: int, escapes: bool) -> tuple[_Chars, int] | None:
    """Parse ``[...]`` starting at ``pattern[i] == "["``; None when it does not close."""
    j = i + 1
    negate = j < len(pattern) and pattern[j] in "!^"
    if negate:
        j += 1
    members: set[str] = set()
    ranges: list[tuple[str, str]] = []
    first = True
    while j < len(pattern):
        c = pattern[j]
        if c == "]" and not first:
            return _Chars(frozenset(members), tuple(ranges), negate), j + 1
        first = False
        if escapes and c == "\\" and j + 1 < len(pattern):
            c = pattern[j + 1]
            j += 1
        if j + 2 < len(pattern) and pattern[j + 1] == "-" and pattern[j + 2] != "]":
            ranges.append((c, pattern[j + 2]))
            j += 3
            continue
        members.add(c)
        j += 1
    return None


def _items(pattern: str, *, escapes: bool) -> list[_Item]:
    """A word pattern (escapes, ANY) or a policy glob (``**``, no escapes) as items."""
    out: list[_Item] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if escapes and c == "\\" and i + 1 < len(pattern):
            out.append(_literal(pattern[i + 1]))
            i += 2
        elif c == ANY and escapes:
            out.append(_Star(slash=True))
            i += 1
        elif c == "*":
            double = not escapes and pattern.startswith("**", i)
            out.append(_Star(slash=double))
            i += 2 if double else 1
        elif c == "?":
            out.append(_ANY_CHAR)
            i += 1
        elif c == "[" and (parsed := _bracket(pattern, i, escapes)) is not None:
            out.append(parsed[0])
            i = parsed[1]
        else:
            out.append(_literal(c))
            i += 1
    # Merge runs of stars: the search needs no more than one.
    merged: list[_Item] = []
    for item in out:
        if isinstance(item, _Star) and merged and isinstance(merged[-1], _Star):
            merged[-1] = _Star(merged[-1].slash or item.slash)
        else:
            merged.append(item)
    return merged


def _braces(pattern: str) -> list[str]:
    """Expand ``{a,b}`` in a policy glob (small, written by people)."""
    start = pattern.find("{")
    if start < 0:
        return [pattern]
    depth, last, parts = 0, start + 1, []
    for j in range(start, len(pattern)):
        if pattern[j] == "{":
            depth += 1
        elif pattern[j] == "}":
            depth -= 1
            if depth == 0:
                parts.append(pattern[last:j])
                if len(parts) < 2:
                    break
                rest = pattern[j + 1 :]
                return [p for part in parts for p in _braces(pattern[:start] + part + rest)]
        elif pattern[j] == "," and depth == 1:
            parts.append(pattern[last:j])
            last = j + 1
    return [pattern]


@lru_cache(maxsize=512)
def _policy_alternatives(glob: str) -> tuple[tuple[_Item, ...], ...]:
    """Item lists that together match what :func:`caisson.policy.paths.glob_match` matches:
    an unanchored glob matches at any depth, ``**/`` is zero or more directories."""
    out: list[tuple[_Item, ...]] = []
    for expanded in _braces(glob):
        variants = [expanded] if expanded.startswith("/") else [expanded, "**/" + expanded]
        for variant in variants:
            pieces = variant.split("**/")
            # Each "**/" is either nothing or "**" followed by "/".
            combos = [""]
            for piece in pieces[1:]:
                combos = [c + sep + piece for c in combos for sep in ("", "\x01")]
            for combo in combos:
                text = pieces[0] + combo.replace("\x01", "**/")
                out.append(tuple(_items(text, escapes=False)))
    return tuple(out)


def _common_char(a: _Chars, b: _Chars) -> bool:
    candidates = a.mentioned() | b.mentioned() | {"/", _FRESH}
    return any(a.has(c) and b.has(c) for c in candidates)


def _star_chars(star: _Star) -> _Chars:
    return _Chars(frozenset(), negate=True, slash=star.slash)


def _intersect(a: list[_Item], b: tuple[_Item, ...]) -> bool:
    seen: set[tuple[int, int]] = set()
    stack = [(0, 0)]
    while stack:
        i, j = stack.pop()
        if (i, j) in seen:
            continue
        seen.add((i, j))
        if i == len(a) and j == len(b):
            return True
        x = a[i] if i < len(a) else None
        y = b[j] if j < len(b) else None
        if isinstance(x, _Star):
            stack.append((i + 1, j))
        if isinstance(y, _Star):
            stack.append((i, j + 1))
        if x is None or y is None or (isinstance(x, _Star) and isinstance(y, _Star)):
            continue
        # Both sides take one character.
        cx = _star_chars(x) if isinstance(x, _Star) else x
        cy = _star_chars(y) if isinstance(y, _Star) else y
        if _common_char(cx, cy):
            stack.append((i if isinstance(x, _Star) else i + 1, j if isinstance(y, _Star) else j + 1))
    return False


def may_match(word_pattern: str, policy_globs: tuple[str, ...] | list[str]) -> str | None:
    """The first policy glob that some expansion of ``word_pattern`` may match, else None."""
    items = _items(word_pattern, escapes=True)
    for glob in policy_globs:
        if len(items) > _MAX_ITEMS:
            return glob
        if any(_intersect(items, alt) for alt in _policy_alternatives(glob)):
            return glob
    return None
