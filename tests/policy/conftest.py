from __future__ import annotations

import itertools
from typing import Any

import pytest

from caisson.policy import CallRequest, ResolvedPath
from caisson.tools.base import REGISTRY

_ids = itertools.count(1)


def make_call(
    tool: str,
    *,
    paths: list[str] | list[tuple[str, str]] | None = None,
    command: str | None = None,
    access: str = "read",
    args: dict[str, Any] | None = None,
    **extra: Any,
) -> CallRequest:
    """A call as the session layer would build it (with the tool's declared level); a plain
    string path resolves to itself."""
    resolved = [
        ResolvedPath(requested=p, resolved=p) if isinstance(p, str) else ResolvedPath(requested=p[0], resolved=p[1])
        for p in paths or []
    ]
    if args is None:
        args = {"command": command} if command is not None else {"path": resolved[0].requested} if resolved else {}
    return CallRequest(
        tenant=extra.pop("tenant", "acme"),
        session_id=extra.pop("session_id", "s1"),
        call_id=f"c{next(_ids)}",
        tool=tool,
        level=extra.pop("level", REGISTRY[tool].level if tool in REGISTRY else None),
        paths=resolved,
        command=command,
        access=access,  # type: ignore[arg-type]
        args=args,
        **extra,
    )


@pytest.fixture
def call() -> Any:
    return make_call
