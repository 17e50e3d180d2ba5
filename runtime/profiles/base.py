"""A profile: one specification's tool surface mapped onto the canonical tools.

Each profile tool has the specification's own name and input model; it converts its
arguments to the canonical tool's input and the canonical result to the
specification's output shape and texts.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from caisson.policy import Level
from caisson.tools.base import REGISTRY, Tool, ToolResult
from caisson.tools.context import CatalogEntry

if TYPE_CHECKING:
    from caisson.tools.context import ToolContext


def _identity_args(args: BaseModel, ctx: ToolContext) -> BaseModel:
    return args


def _identity_result(result: ToolResult, args: BaseModel) -> ToolResult:
    return result


@dataclass(frozen=True)
class ProfileTool:
    name: str
    canonical: Tool
    input_model: type[BaseModel]
    # Profile arguments -> canonical input model instance.
    to_canonical: Callable[[BaseModel, ToolContext], BaseModel | Awaitable[BaseModel]] = _identity_args
    # Canonical result -> the specification's output shape and text.
    present: Callable[[ToolResult, BaseModel], ToolResult] = _identity_result
    description: str = ""
    snippet: str = ""
    guidelines: tuple[str, ...] = ()
    level: Level | None = None
    aliases: tuple[str, ...] = ()

    @property
    def effective_level(self) -> Level:
        return self.level or self.canonical.level


@dataclass
class Profile:
    name: str
    tools: dict[str, ProfileTool] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)
    description: str = ""

    def add(self, tool: ProfileTool) -> None:
        self.tools[tool.name] = tool
        for alias in tool.aliases:
            self.aliases[alias] = tool.name
        self.__dict__.pop("catalog", None)

    @cached_property
    def catalog(self) -> tuple[CatalogEntry, ...]:
        """The tools this profile offers, under its own names, as tool_search shows them."""
        return tuple(
            CatalogEntry(t.name, t.description or t.canonical.description, t.input_model) for t in self.tools.values()
        )

    def lookup(self, name: str) -> ProfileTool | None:
        return self.tools.get(self.aliases.get(name, name))


def canonical_args(name: str, **args: Any) -> Any:
    """The canonical tool ``name``'s validated input, built by a profile's mapping (typed Any:
    the model class depends on ``name``)."""
    return REGISTRY[name].input_model.model_validate(args)


def canonical_profile() -> Profile:
    """The `caisson` profile: every canonical tool under its own name, unchanged."""
    profile = Profile(name="caisson", description="caisson's canonical tool surface")
    for tool in REGISTRY.values():
        profile.add(
            ProfileTool(
                name=tool.name,
                canonical=tool,
                input_model=tool.input_model,
                description=tool.description,
                snippet=tool.snippet,
                guidelines=tool.guidelines,
            )
        )
    return profile


