"""How a canonical tool is defined: input model, permission level, prompt snippet, handler.

A tool is declared once with :func:`tool`; the registry is what profiles map onto and
what the dispatcher runs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from caisson.policy import Access, Level

if TYPE_CHECKING:
    from caisson.tools.context import ToolContext



class ToolErrorInfo(BaseModel):
    code: str = Field(description="stable machine-readable code, e.g. not_found, invalid_arguments")
    message: str


class ToolResult(BaseModel):
    """What every tool call returns, whatever the tool."""

    model_config = ConfigDict(extra="forbid")

    ok: bool
    text: str = Field("", description="what an agent should be shown")
    data: Any = Field(None, description="structured result (JSON-serialisable)")
    error: ToolErrorInfo | None = None
    truncated: bool = False
    truncation: dict[str, Any] | None = Field(None, description="facts about what was cut, and how to get more")
    tool: str = ""
    call_id: str = ""
    level: Level | None = None
    decision: str | None = Field(None, description="allow / warn / approved / denied")

    @classmethod
    def success(cls, text: str, data: Any = None, **kw: Any) -> ToolResult:
        return cls(ok=True, text=text, data=data, **kw)

    @classmethod
    def failure(cls, code: str, message: str, data: Any = None) -> ToolResult:
        return cls(ok=False, text=message, data=data, error=ToolErrorInfo(code=code, message=message))


class ToolError(Exception):
    """Raised by a handler for an expected failure; becomes ``ToolResult.failure``."""

    def __init__(self, code: str, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


class NotPlain(Exception):
    """Raised by a handler of a ``plain`` tool, before any effect, when its path was not the
    plain one the policy was told of: the dispatcher resolves it and decides again."""


class ToolInput(BaseModel):
    # Unknown arguments are an error an agent can read, not silently dropped.
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


Handler = Callable[["ToolContext", Any], Awaitable[ToolResult]]


@dataclass(frozen=True)
class Tool:
    name: str
    input_model: type[BaseModel]
    handler: Handler
    level: Level
    access: Access
    snippet: str
    guidelines: tuple[str, ...] = ()
    # Which arguments name container paths, and which a shell command, for the policy.
    paths: Callable[[Any], list[str]] = field(default=lambda args: [])
    command: Callable[[Any], str | None] = field(default=lambda args: None)
    # Which argument is a URL the host will request (data leaving), for the policy.
    url: Callable[[Any], str | None] = field(default=lambda args: None)
    description: str = ""
    # Bytes of a regular file at ``paths`` read while resolving it for the policy (ToolContext.probe).
    prefetch: int = 0
    # The handler touches its paths only if they are plain (no symbolic link on the way, a
    # regular file's only name) and raises NotPlain otherwise: the policy may decide on them as
    # given, without resolving them first (ToolContext.plain).
    plain: bool = False
    # A writing tool that reads its paths' contents first (an edit matches text in them): the
    # policy keeps it from secret files as it keeps a read.
    reads: bool = False


REGISTRY: dict[str, Tool] = {}


def tool(
    name: str,
    input_model: type[BaseModel],
    *,
    level: Level,
    access: Access,
    snippet: str,
    description: str = "",
    guidelines: tuple[str, ...] = (),
    paths: Callable[[Any], list[str]] | None = None,
    command: Callable[[Any], str | None] | None = None,
    url: Callable[[Any], str | None] | None = None,
    prefetch: int = 0,
    plain: bool = False,
    reads: bool = False,
) -> Callable[[Handler], Handler]:
    """Register ``handler`` as the canonical tool ``name``."""

    def register(handler: Handler) -> Handler:
        if name in REGISTRY:
            raise ValueError(f"tool {name!r} is defined twice")
        REGISTRY[name] = Tool(
            name=name,
            input_model=input_model,
            handler=handler,
            level=level,
            access=access,
            snippet=snippet,
            description=description or snippet,
            guidelines=guidelines,
            paths=paths or (lambda args: []),
            command=command or (lambda args: None),
            url=url or (lambda args: None),
            prefetch=prefetch,
            plain=plain,
            reads=reads,
        )
        return handler

    return register
