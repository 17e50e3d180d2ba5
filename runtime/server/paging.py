"""Cursor pagination, one convention for every list: ``limit``, ``order`` (oldest or newest
first) and ``cursor`` in; ``{items, next_cursor}`` out, ``next_cursor`` absent on the last
page. A cursor names the last row of a page (the row's id, or its creation time and id), so
rows added meanwhile never shift a page or show twice."""

from __future__ import annotations

import re
from typing import Annotated, Generic, Literal, Self, TypeVar

from fastapi import Query
from pydantic import BaseModel

T = TypeVar("T")

Limit = Annotated[int, Query(ge=1, le=10_000, description="the largest number of items on a page")]
Order = Annotated[Literal["oldest", "newest"], Query(description="oldest first, or newest first")]
# The rows of an auto-numbered table (the audit, the request log): the last row's number.
IdCursor = Annotated[str | None, Query(pattern=r"^[0-9]{1,19}$", description="a page's next_cursor")]
# The rows of a table keyed by a name (sessions, approvals, ...): the last row's creation time and id.
KeyCursor = Annotated[
    str | None, Query(pattern=r"^[0-9.e+-]{1,32}_[A-Za-z0-9._-]{1,64}$", description="a page's next_cursor")
]
_KEY = re.compile(r"^([0-9.e+-]{1,32})_(.+)$")


class Page(BaseModel, Generic[T]):
    """A page of a list; ``next_cursor`` (absent on the last page) asks for the next."""

    items: list[T]
    next_cursor: str | None = None

    @classmethod
    def of(cls, found: list[tuple[str, T]], limit: int) -> Self:
        """The page of ``limit + 1`` rows fetched with their cursors: the extra row only says
        that there is a next page."""
        shown = found[:limit]
        return cls(items=[item for _, item in shown], next_cursor=shown[-1][0] if len(found) > limit else None)


class InvalidCursor(ValueError):
    """A cursor no page gave: answered 422."""


def key_of(cursor: str | None) -> tuple[float, str] | None:
    """The (creation time, id) a key cursor names."""
    if cursor is None:
        return None
    found = _KEY.match(cursor)
    try:
        if found is None:
            raise ValueError(cursor)
        return float(found.group(1)), found.group(2)
    except ValueError:
        raise InvalidCursor("this cursor is not one a page gave: ask again without it") from None


def key_cursor(created: float, key: str) -> str:
    # repr: the shortest text that reads back as the same float, so the next page starts exactly after.
    return f"{created!r}_{key}"
