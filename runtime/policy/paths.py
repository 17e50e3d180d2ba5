"""Path globs, workspace confinement and secret-file patterns.

Paths here are container paths (POSIX). Callers pass paths already resolved inside the
container (symlinks followed); the helpers below still collapse ``.`` and ``..`` lexically so
that an unresolved ``/workspace/../etc/passwd`` can never pass for a workspace path.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable
from functools import lru_cache

DEFAULT_WORKSPACE_ROOTS: tuple[str, ...] = ("/workspace", "/tmp")

# Matched like every policy glob: a pattern without a leading "/" matches at any depth.
DEFAULT_SECRET_PATTERNS: tuple[str, ...] = (
    ".env",
    ".env.*",
    "credentials",
    "credentials.*",
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "*.jks",
    "*.keystore",
    "*.kdbx",
    "id_rsa",
    "id_dsa",
    "id_ecdsa",
    "id_ed25519",
    "id_ecdsa_sk",
    "id_ed25519_sk",
    ".netrc",
    "_netrc",
    ".pgpass",
    ".git-credentials",
    ".pypirc",
    ".npmrc",
    ".htpasswd",
    ".vault-token",
    ".docker/config.json",
    ".kube/config",
)

# Templates that document variables without holding values.
DEFAULT_SECRET_EXCEPTIONS: tuple[str, ...] = (
    ".env.example",
    ".env.sample",
    ".env.template",
    ".env.dist",
)

# Writing these turns later "read-only" git commands into code execution (hooks, fsmonitor,
# pager, filters), so a write to them counts as dangerous. ".git" itself covers copying or
# moving a directory over it; .husky and .githooks are the usual core.hooksPath targets.
DEFAULT_PROTECTED_PATHS: tuple[str, ...] = (
    ".git",
    ".git/**",
    ".gitconfig",
    ".husky/**",
    ".githooks/**",
)


def normalize(path: str) -> str:
    """Collapse ``.``, ``..`` and repeated slashes without touching the filesystem."""
    if not path:
        return "."
    norm = posixpath.normpath(path)
    if norm.startswith("//"):
        norm = "/" + norm.lstrip("/")
    return norm


def is_within(path: str, roots: Iterable[str]) -> bool:
    """True when the absolute ``path`` is one of ``roots`` or below one of them."""
    if not path.startswith("/"):
        return False
    norm = normalize(path)
    for root in roots:
        r = normalize(root)
        if r == "/" or norm == r or norm.startswith(r + "/"):
            return True
    return False


@lru_cache(maxsize=1024)
def _glob_regex(pattern: str) -> re.Pattern[str]:
    anchored = pattern.startswith("/")
    body = _translate(pattern)
    return re.compile(body if anchored else "(?:.*/)?" + body, re.DOTALL)


def _translate(pattern: str) -> str:
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "*":
            if pattern.startswith("**", i):
                i += 2
                if pattern.startswith("/", i):
                    out.append("(?:.*/)?")
                    i += 1
                else:
                    out.append(".*")
                continue
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = _class_end(pattern, i)
            if end < 0:
                out.append(re.escape(c))
            else:
                inner = pattern[i + 1 : end]
                negate = inner[:1] in ("!", "^")
                if negate:
                    inner = inner[1:]
                inner = inner.replace("\\", "\\\\")
                out.append(f"[^/{inner}]" if negate else f"[{inner}]")
                i = end
        elif c == "{":
            end, alternatives = _braces(pattern, i)
            if end < 0:
                out.append(re.escape(c))
            else:
                out.append("(?:" + "|".join(_translate(a) for a in alternatives) + ")")
                i = end
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def _class_end(pattern: str, start: int) -> int:
    j = start + 1
    if j < len(pattern) and pattern[j] in "!^":
        j += 1
    if j < len(pattern) and pattern[j] == "]":
        j += 1
    end = pattern.find("]", j)
    return end


def _braces(pattern: str, start: int) -> tuple[int, list[str]]:
    depth, parts, last = 0, [], start + 1
    for j in range(start, len(pattern)):
        c = pattern[j]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                parts.append(pattern[last:j])
                return (j, parts) if len(parts) > 1 else (-1, [])
        elif c == "," and depth == 1:
            parts.append(pattern[last:j])
            last = j + 1
    return -1, []


def glob_match(pattern: str, path: str) -> bool:
    """Match a path against a glob.

    ``*`` and ``?`` stay within one path segment, ``**`` spans segments, ``[...]`` and
    ``{a,b}`` work as in the shell. A pattern starting with ``/`` must match the whole
    absolute path; any other pattern matches the trailing segments (``*.pem`` matches every
    .pem file, ``.git/hooks/**`` every hook of every repository).
    """
    return _glob_regex(pattern).fullmatch(path) is not None


def matches_any(patterns: Iterable[str], path: str) -> str | None:
    """The first pattern that matches ``path``, if any."""
    for pattern in patterns:
        if glob_match(pattern, path):
            return pattern
    return None


def is_secret(
    path: str,
    patterns: Iterable[str] = DEFAULT_SECRET_PATTERNS,
    exceptions: Iterable[str] = DEFAULT_SECRET_EXCEPTIONS,
) -> str | None:
    """The secret pattern ``path`` matches (unless an exception matches too), else None."""
    hit = matches_any(patterns, path)
    if hit is None or matches_any(exceptions, path) is not None:
        return None
    return hit
