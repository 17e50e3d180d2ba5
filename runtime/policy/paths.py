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

# Matched like every policy glob (a pattern without a leading "/" matches at any depth), and
# without regard to case: `.ENV` and `Secrets.YAML` hold secrets as much as their lower-case names.
DEFAULT_SECRET_PATTERNS: tuple[str, ...] = (
    ".env*",
    "*.env",
    "credentials*",
    "secrets.*",
    "*service-account*.json",
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "*.jks",
    "*.keystore",
    "*.kdbx",
    "id_*",
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

# Templates that document variables without holding values, and public halves of key pairs.
DEFAULT_SECRET_EXCEPTIONS: tuple[str, ...] = (
    ".env.example",
    ".env.sample",
    ".env.template",
    ".env.dist",
    "*.pub",
)

# Writing these turns later "read-only" git commands into code execution (hooks, fsmonitor,
# pager, filters), so a write to them counts as dangerous. ".git" itself covers copying or
# moving a directory (or a link) over it; .husky and .githooks, the usual core.hooksPath
# targets, likewise.
#
# The same for what other programs read at start and act on, since the agent's home is a
# writable root and a later unconfined command (an approved one, a harness's test run) would
# run it: shell start-up files, editors' and pagers' settings, Python's site hooks (.pth,
# sitecustomize, usercustomize), package managers' run and index settings (a venv's pip.conf,
# a project's .cargo/config.toml), ssh and credential helpers (.netrc's macros run at login).
# In the home every dot entry is protected as a whole, since programs too many to list read
# their start-up code there (.gdbinit, .Rprofile, .sqliterc, ~/.ipython, ~/.gradle/init.d ...),
# and ~/bin, which a login shell puts on PATH (as ~/.local/bin). A top-level entry of the home
# (and the home itself, as a copy's destination) too: the kernel lets a cautious command write
# only beneath the home's existing entries, so making a new one there needs approval.
DEFAULT_PROTECTED_PATHS: tuple[str, ...] = (
    ".git",
    ".git/**",
    ".gitconfig",
    ".husky", ".husky/**",
    ".githooks", ".githooks/**",
    ".config/git",
    ".config/git/**",
    ".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".bash_aliases", ".profile",
    ".zshrc", ".zshenv", ".zprofile", ".zlogin", ".zlogout", ".kshrc", ".mkshrc", ".cshrc", ".tcshrc",
    ".inputrc", ".vimrc", ".exrc", ".lesskey", ".pythonrc", ".npmrc", ".yarnrc", ".yarnrc.yml",
    ".curlrc", ".wgetrc", ".hgrc",
    "*.pth", "sitecustomize.py", "usercustomize.py",
    ".ssh", ".ssh/**", ".gnupg", ".gnupg/**", ".docker", ".docker/**", ".kube", ".kube/**", ".aws", ".aws/**",
    "pip.conf", "pip.ini", ".pydistutils.cfg", ".cargo/config", ".cargo/config.toml", ".netrc", "_netrc",
    "/home/*/.*", "/home/*/.*/**", "/home/*/bin", "/home/*/bin/**", "/home/*", "/home/*/*",
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
    body = glob_translate(pattern)
    return re.compile(body if anchored else "(?:.*/)?" + body, re.DOTALL)


def _split_alternatives(body: str) -> list[str]:
    parts, depth, start, i = [], 0, 0, 0
    while i < len(body):
        c = body[i]
        if c == "\\":
            i += 2
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(body[start:i])
            start = i + 1
        i += 1
    parts.append(body[start:])
    return parts


def _closing(pattern: str, i: int, open_: str, close: str) -> int:
    """Index of the bracket closing the one at ``i`` (-1 if unbalanced)."""
    depth = 0
    j = i
    while j < len(pattern):
        c = pattern[j]
        if c == "\\":
            j += 2
            continue
        if c == open_:
            depth += 1
        elif c == close:
            depth -= 1
            if depth == 0:
                return j
        j += 1
    return -1


def glob_translate(pattern: str) -> str:
    """The one glob syntax of caisson (policy rules and the search tools alike), as a regex:
    ``*`` and ``?`` stop at ``/``; ``**`` as a whole segment spans directories (elsewhere it
    is ``*``, as in gitignore and ripgrep); ``[abc]``, ``[!abc]``, nestable ``{a,b}``; ``\\``
    escapes."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            out.append(re.escape(pattern[i + 1]))
            i += 2
        elif c == "*":
            if pattern.startswith("**", i) and (i == 0 or pattern[i - 1] == "/"):
                end = i + 2
                if end == n:
                    out.append(".*")
                    i = end
                    continue
                if pattern[end] == "/":
                    out.append("(?:.*/)?")
                    i = end + 1
                    continue
            while i < n and pattern[i] == "*":
                i += 1
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            j = i + 1
            if j < n and pattern[j] in "!^":
                j += 1
            if j < n and pattern[j] == "]":
                j += 1
            while j < n and pattern[j] != "]":
                j += 1
            if j >= n:
                out.append(re.escape(c))
                i += 1
                continue
            body = pattern[i + 1 : j].replace("\\", "\\\\")
            if body[:1] in ("!", "^"):
                body = "^/" + body[1:]
            out.append(f"[{body}]")
            i = j + 1
        elif c == "{":
            j = _closing(pattern, i, "{", "}")
            if j < 0:
                out.append(re.escape(c))
                i += 1
                continue
            alternatives = _split_alternatives(pattern[i + 1 : j])
            out.append("(?:" + "|".join(glob_translate(a) for a in alternatives) + ")")
            i = j + 1
        else:
            out.append(re.escape(c))
            i += 1
    return "".join(out)


def glob_match(pattern: str, path: str) -> bool:
    """Match a path against a glob.

    The syntax is :func:`glob_translate`'s. A pattern starting with ``/`` must match the whole
    absolute path; any other pattern matches the trailing segments (``*.pem`` matches every
    .pem file, ``.git/hooks/**`` every hook of every repository).
    """
    return _glob_regex(pattern).fullmatch(path) is not None


def is_home_entry(path: str) -> bool:
    """A home (``/home/<user>``) or one of its top-level entries other than a dot entry or ``bin``."""
    parts = normalize(path).split("/")
    return len(parts) in (3, 4) and parts[1] == "home" and (len(parts) == 3 or parts[3][:1] != "." and parts[3] != "bin")


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
    """The secret pattern ``path`` matches, regardless of case (unless an exception matches
    too), else None."""
    lowered = path.lower()
    patterns = tuple(patterns)
    # Two regexes for all patterns: most paths match none (a search filters thousands).
    by_name, whole = _any_regex(patterns)
    if by_name.fullmatch(lowered.rpartition("/")[2]) is None and whole.fullmatch(lowered) is None:
        return None
    hit = next((p for p in patterns if glob_match(p.lower(), lowered)), None)
    if hit is None or any(glob_match(e.lower(), lowered) for e in exceptions):
        return None
    return hit


def _name_only(pattern: str) -> bool:
    """Whether ``pattern`` matches a path exactly when it matches the path's last segment."""
    body = pattern.removeprefix("**/")
    return not body.startswith("/") and "/" not in body and "**" not in body


@lru_cache(maxsize=64)
def _any_regex(patterns: tuple[str, ...]) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """What matches the last segment of a path that any of ``patterns`` matches, and what
    matches a whole path that any other of them matches, regardless of case (see is_secret).
    Most patterns name files: matching those on the name alone spares the regex engine
    trying every slash of the path for each of them."""

    def either(bodies: list[str]) -> re.Pattern[str]:
        return re.compile("|".join(f"(?:{b})" for b in bodies) or r"(?!)", re.DOTALL)

    lowered = [p.lower() for p in patterns]
    names = [glob_translate(p.removeprefix("**/")) for p in lowered if _name_only(p)]
    return either(names), either([_glob_regex(p).pattern for p in lowered if not _name_only(p)])
