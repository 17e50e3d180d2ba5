"""Texts as the control-plane store takes them. A caller controls much of what is written
(tool names, arguments, paths, ids in URLs); a text the store refuses would fail a look-up
(read as the store not answering) or a whole audit batch, which is retried until written, so
one caller's odd text would hold every other call's answer."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa


def fitted(table: sa.Table, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` with each text cut to its column (an unknown tool's name, a path), measured
    with its NUL bytes escaped as ``nul_escaped`` will send it."""
    limits = {c.name: getattr(c.type, "length", None) for c in table.columns}
    for row in rows:
        for name, value in row.items():
            if isinstance(value, str):
                limit = limits.get(name)
                row[name] = _escaped(value)[:limit] if limit else value
    return rows


def _escaped(value: Any) -> Any:
    return value.replace("\x00", "\\x00") if isinstance(value, str) and "\x00" in value else value


def nul_escaped(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool) -> tuple[str, Any]:
    """Every text sent to the store with its NUL bytes written as ``\\x00``: PostgreSQL's text
    refuses NUL, and a refused look-up (an id in a URL) would read as the store not answering.
    Writes and look-ups escape alike, so what was written is found by the same text."""

    def one(params: Any) -> Any:
        if isinstance(params, dict):
            return {k: _escaped(v) for k, v in params.items()}
        if isinstance(params, (list, tuple)):
            return type(params)(_escaped(v) for v in params)
        return params

    return statement, [one(p) for p in parameters] if executemany else one(parameters)
