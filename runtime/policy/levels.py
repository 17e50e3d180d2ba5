"""Permission levels (a tool declares its own, with the tool: ``caisson.tools.base.tool``)."""

from __future__ import annotations

from enum import StrEnum


class _RankedStrEnum(StrEnum):
    """A StrEnum ordered by declaration, not alphabetically (str's own ordering)."""

    @property
    def rank(self) -> int:
        return type(self)._member_names_.index(self.name)

    def _rank_of(self, other: object) -> int | None:
        if isinstance(other, type(self)):
            return other.rank
        return None

    def __lt__(self, other: object) -> bool:
        rank = self._rank_of(other)
        return NotImplemented if rank is None else self.rank < rank

    def __le__(self, other: object) -> bool:
        rank = self._rank_of(other)
        return NotImplemented if rank is None else self.rank <= rank

    def __gt__(self, other: object) -> bool:
        rank = self._rank_of(other)
        return NotImplemented if rank is None else self.rank > rank

    def __ge__(self, other: object) -> bool:
        rank = self._rank_of(other)
        return NotImplemented if rank is None else self.rank >= rank

    __hash__ = StrEnum.__hash__


class Level(_RankedStrEnum):
    """Risk of a tool call: safe < cautious < dangerous."""

    SAFE = "safe"
    CAUTIOUS = "cautious"
    DANGEROUS = "dangerous"


class GrantLevel(_RankedStrEnum):
    """Access a session grant covers (ask_for_permissions): read < write < execute < admin."""

    READ = "read"
    WRITE = "write"
    EXECUTE = "execute"
    ADMIN = "admin"
