"""What :func:`classify_bash` returns."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from ..levels import Level


class BashSegment(BaseModel):
    """One command the line runs (quotes removed, words joined by single spaces)."""

    model_config = ConfigDict(frozen=True)

    text: str
    level: Level


class BashClassification(BaseModel):
    """Result of :func:`classify_bash`.

    ``segments`` are the individual commands (including those inside substitutions, behind
    wrappers such as ``timeout`` or run by ``find -exec`` / ``xargs``); ``residual`` is the
    level of the effects that belong to no single command (redirections, variable
    assignments, expansions that can run code, a line that could not be parsed). Allow rules
    and grants that cover commands lower segments, never the residual.
    """

    model_config = ConfigDict(frozen=True)

    level: Level
    reasons: list[str]
    destructive: str | None = None
    segments: list[BashSegment] = []
    residual: Level = Level.SAFE
    parsed: bool = True
