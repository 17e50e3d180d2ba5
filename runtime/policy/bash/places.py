"""Where a path argument points: the directories a command may run in, workspace
confinement, and whether a path (or any expansion of a glob or computed word) is a secret
file or a path that makes git run code.

A working directory is absolute (known), relative (somewhere inside the workspace, e.g.
``.git`` after ``cd .git`` from an unknown place) or None (unknown: ``cd "$X"``, ``cd ~``,
``popd``, a ``..`` that leaves the workspace). A ``cd`` adds to the set instead of
replacing it: it may fail, run conditionally or in a subshell. The checks are lexical;
symbolic links inside the container are the container's business.
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence

from ..paths import is_secret, is_within, matches_any, normalize
from .globs import may_match
from .lexer import ANY, Word, escape_glob


def _escapes(rel: str) -> bool:
    return rel == ".." or rel.startswith("../")


class Places:
    def __init__(
        self,
        roots: Sequence[str],
        secret_patterns: Sequence[str],
        secret_exceptions: Sequence[str],
        protected: Sequence[str],
        cwd: str | None,
    ) -> None:
        self.roots = tuple(normalize(r) for r in roots)
        self.secret_patterns = tuple(secret_patterns)
        self.secret_patterns_lower = tuple(p.lower() for p in secret_patterns)
        self.secret_exceptions = tuple(secret_exceptions)
        self.protected = tuple(protected)
        self.initial: str = normalize(cwd) if cwd and cwd.startswith("/") else "."
        self.cwds: set[str | None] = {self.initial}

    @property
    def moved(self) -> bool:
        """Whether a command may now run somewhere other than the starting directory."""
        return self.cwds != {self.initial}

    def chdir(self, path: str | None) -> None:
        """A ``cd`` to ``path`` (None: somewhere unknown)."""
        if path is None or path.startswith("~"):
            self.cwds.add(None)
            return
        new: set[str | None] = set()
        for cwd in self.cwds:
            if path.startswith("/"):
                new.add(normalize(path))
            elif cwd is None:
                new.add(None)
            else:
                joined = normalize(posixpath.join(cwd, path))
                new.add(None if not cwd.startswith("/") and _escapes(joined) else joined)
        self.cwds |= new

    def inside(self, path: str) -> bool:
        """Whether a (static) path is inside the workspace from every possible cwd."""
        if path.startswith("~"):
            return False
        if path.startswith("/"):
            return is_within(path, self.roots)
        for cwd in self.cwds:
            if cwd is None:
                return False
            joined = normalize(posixpath.join(cwd, path))
            if (cwd.startswith("/") and not is_within(joined, self.roots)) or (
                not cwd.startswith("/") and _escapes(joined)
            ):
                return False
        return True

    def candidates(self, path: str) -> list[str]:
        """The paths a static path may name (relative ones stay relative when the cwd is)."""
        if path.startswith("/"):
            return [normalize(path)]
        out = {normalize(posixpath.join(c, path)) for c in self.cwds if c is not None}
        if None in self.cwds:
            out.add(normalize(path))
        return sorted(out)

    def glob_candidates(self, pattern: str) -> list[str]:
        """Word patterns (see :mod:`.globs`) for the paths a glob or computed word may name."""
        if pattern.startswith(("/", ANY)):
            return [pattern]
        out = []
        for cwd in self.cwds:
            if cwd is None:
                out.append(ANY + "/" + pattern)
            elif cwd.startswith("/"):
                out.append(escape_glob(cwd) + "/" + pattern)
            else:
                out.append(ANY + "/" + escape_glob(cwd) + "/" + pattern)
        return out

    def secret(self, word: Word) -> tuple[str, bool] | None:
        """(what matched, certain) when the word names or may name a secret file."""
        if word.static:
            path = word.value or ""
            for candidate in self.candidates(path):
                if is_secret(candidate, self.secret_patterns, self.secret_exceptions):
                    return posixpath.basename(path) or path, True
            return None
        for pattern in self.glob_candidates(word.glob_pattern):
            # Secret patterns ignore case (see is_secret): compare lower-cased on both sides.
            hit = may_match(pattern.lower(), self.secret_patterns_lower)
            if hit is not None:
                return hit, False
        return None

    def protected_path(self, word: Word) -> str | None:
        """The path or pattern of git's machinery that the word names or may name."""
        if word.static:
            for candidate in self.candidates(word.value or ""):
                if matches_any(self.protected, candidate):
                    return candidate
            return None
        for pattern in self.glob_candidates(word.glob_pattern):
            hit = may_match(pattern, self.protected)
            if hit is not None:
                return hit
        return None
