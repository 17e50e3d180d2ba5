"""Session grants: approvals remembered for the rest of a session.

The same store backs "allow for the session" answers of the approval handler and the
``ask_for_permissions`` tool (target_type path/domain/command, level read/write/execute/admin,
recursive for paths).
"""

from __future__ import annotations

import threading
import uuid
from datetime import UTC, datetime
from fnmatch import fnmatchcase
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from .levels import GrantLevel
from .paths import glob_match, normalize

TargetType = Literal["path", "domain", "command", "tool"]
_GLOB_CHARS = frozenset("*?[{")


class Grant(BaseModel):
    """Permission for one target. ``tool`` grants (a tool by canonical name) exist for calls
    that have no path, domain or command to scope them; ask_for_permissions creates the other
    three kinds. A grant covers requests of its level or below (read < write < execute < admin).
    ``once`` grants are consumed by the first call they approve."""

    model_config = ConfigDict(frozen=True)

    id: str = Field(default_factory=lambda: uuid.uuid4().hex[:12])
    target_type: TargetType
    target: str
    level: GrantLevel
    recursive: bool = False
    once: bool = False
    description: str | None = None
    granted_by: str | None = None
    created_at: datetime = Field(default_factory=lambda: datetime.now(UTC))

    def matches(self, target_type: TargetType, target: str, level: GrantLevel) -> bool:
        if target_type != self.target_type or level > self.level:
            return False
        if target_type == "path":
            return _path_covered(self.target, self.recursive, target)
        if target_type == "domain":
            # Domains support patterns (*.example.com); hostnames are case-insensitive.
            return fnmatchcase(target.lower().rstrip("."), self.target.lower().rstrip("."))
        if target_type == "command":
            return _command_matches(self.target, target)
        return target == self.target

    def covers(self, other: Grant) -> bool:
        """Whether this grant already gives everything ``other`` asks for."""
        if not self.matches(other.target_type, other.target, other.level):
            return False
        if other.target_type == "path" and other.recursive:
            return self.recursive and _path_covered(self.target, True, other.target)
        return True


def _path_covered(grant_target: str, recursive: bool, path: str) -> bool:
    path = normalize(path)
    if _GLOB_CHARS & set(grant_target):
        return glob_match(grant_target, path)
    root = normalize(grant_target)
    if path == root:
        return True
    return recursive and (root == "/" or path.startswith(root + "/"))


def _command_matches(grant_target: str, command: str) -> bool:
    target = " ".join(grant_target.split())
    command = " ".join(command.split())
    if "*" in target or "?" in target:
        return fnmatchcase(command, target)
    return command == target


class GrantStore:
    """The grants of one session (thread-safe; shared by the engine and ask_for_permissions)."""

    def __init__(self) -> None:
        self._grants: list[Grant] = []
        self._lock = threading.Lock()

    def add(self, grant: Grant) -> Grant:
        with self._lock:
            self._grants.append(grant)
        return grant

    def all_grants(self) -> list[Grant]:
        with self._lock:
            return list(self._grants)

    def revoke(self, grant_id: str) -> bool:
        with self._lock:
            before = len(self._grants)
            self._grants = [g for g in self._grants if g.id != grant_id]
            return len(self._grants) != before

    def clear(self) -> None:
        with self._lock:
            self._grants.clear()

    def match(
        self, target_type: TargetType, target: str, level: GrantLevel | str, *, consume: bool = False
    ) -> Grant | None:
        """The first grant covering ``target`` at ``level``; with ``consume`` a once-grant
        that matches is used up."""
        wanted = GrantLevel(level)
        with self._lock:
            for grant in self._grants:
                if grant.matches(target_type, target, wanted):
                    if consume and grant.once:
                        self._grants.remove(grant)
                    return grant
        return None

    def covering(self, grant: Grant) -> Grant | None:
        """An existing grant that already gives everything ``grant`` asks for."""
        with self._lock:
            return next((g for g in self._grants if g.covers(grant)), None)
