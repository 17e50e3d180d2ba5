"""Calling canonical tools in tests the way the dispatcher does, minus policy and audit
(those are tested at the boundary, tests/test_boundary.py)."""

from __future__ import annotations

import uuid
from typing import Any

from pydantic import ValidationError

from caisson import Session
from caisson.tools.base import REGISTRY, ToolError, ToolResult


async def call(session: Session, name: str, **args: Any) -> ToolResult:
    """Validate ``args`` against the tool's input model and run its handler."""
    t = REGISTRY[name]
    try:
        return await t.handler(session.tool_context(), t.input_model.model_validate(args))
    except ValidationError as exc:
        return ToolResult.failure("invalid_arguments", str(exc))
    except ToolError as exc:
        return ToolResult.failure(exc.code, exc.message, exc.data)


def code(r: ToolResult) -> str | None:
    return r.error.code if r.error else None


def fresh_dir() -> str:
    """A new directory name under /workspace, so tests sharing a session don't collide."""
    return f"/workspace/t-{uuid.uuid4().hex[:8]}"
