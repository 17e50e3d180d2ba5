"""Host hooks for tools whose work needs a language model.

caisson runs tools in a sandbox; it never calls a model. Some specifications include
tools that are agent features rather than sandbox features (Amp's finder, oracle and
Task; AgentLoop's plan, run and plan-and-run). A profile still lists them, so an agent
written against the specification sees its whole tool surface, and the embedding
program serves them by registering a hook::

    from caisson.profiles.hooks import register_hook

    async def oracle(ctx, args):              # ctx: a ToolContext (ctx.client.exec, ...);
        return await my_model.ask(args["task"])  # args: the tool's validated arguments

    register_hook("amp", "oracle", oracle)                 # every session of the profile
    register_hook("amp", "oracle", oracle, session=s)      # one session only

A hook returns what the tool's specification says the tool returns (a string or a
JSON-serialisable value); the profile wraps it in the specification's envelope. Without
a hook the call fails with the code ``not_served`` and a message naming this function.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel

from caisson.policy import Level
from caisson.tools.base import Tool, ToolError, ToolResult
from caisson.tools.context import HasToolContext, ToolContext
from caisson.tools.text import shown_json

HookHandler = Callable[["ToolContext", dict[str, Any]], Any | Awaitable[Any]]

_HOOKS: dict[tuple[str, str], HookHandler] = {}
_SESSION_KEY = "profile_hooks"


def _session_hooks(ctx: ToolContext) -> dict[tuple[str, str], HookHandler]:
    hooks: dict[tuple[str, str], HookHandler] = ctx.tool_state(_SESSION_KEY, dict)
    return hooks


def register_hook(profile: str, tool: str, handler: HookHandler, *, session: HasToolContext | None = None) -> None:
    """Serve ``tool`` of ``profile`` with ``handler`` (for one session when ``session`` is given)."""
    if session is None:
        _HOOKS[(profile, tool)] = handler
    else:
        _session_hooks(session.tool_context())[(profile, tool)] = handler


def unregister_hook(profile: str, tool: str, *, session: HasToolContext | None = None) -> None:
    if session is None:
        _HOOKS.pop((profile, tool), None)
    else:
        _session_hooks(session.tool_context()).pop((profile, tool), None)


def find_hook(ctx: ToolContext, profile: str, tool: str) -> HookHandler | None:
    """The session's own hook first, then the process-wide one."""
    return _session_hooks(ctx).get((profile, tool)) or _HOOKS.get((profile, tool))


def not_served_message(profile: str, tool: str, what: str) -> str:
    return (
        f"{tool} is not served: it needs {what}, and caisson does not call models. The embedding "
        f"program can serve it with runtime.profiles.hooks.register_hook({profile!r}, {tool!r}, handler)."
    )


async def call_hook(ctx: ToolContext, profile: str, tool: str, args: BaseModel, what: str) -> Any:
    handler = find_hook(ctx, profile, tool)
    if handler is None:
        raise ToolError("not_served", not_served_message(profile, tool, what))
    value = handler(ctx, args.model_dump(by_alias=True, exclude_none=True))
    return await value if inspect.isawaitable(value) else value


def hook_tool(
    profile: str,
    name: str,
    input_model: type[BaseModel],
    *,
    level: Level,
    snippet: str,
    what: str = "a language model",
) -> Tool:
    """A tool (outside the canonical registry) whose handler is the registered hook.

    The hook's return value is the result's ``data``; the profile's presenter shapes it."""

    async def handler(ctx: ToolContext, args: BaseModel) -> ToolResult:
        value = await call_hook(ctx, profile, name, args, what)
        text = value if isinstance(value, str) else shown_json(value)
        return ToolResult.success(text, value)

    return Tool(
        name=f"hook:{profile}:{name}",
        input_model=input_model,
        handler=handler,
        level=level,
        access="none",
        snippet=snippet,
        description=snippet,
    )
