"""What a tool handler is given: the session's primitives and settings, its grants, the
embedding program's interaction handler, and the id of the call being handled.

Handlers never see the Session: the dispatcher builds one context per call, so whatever a
tool needs from above (the catalog of offered tools, the approval handler) arrives here as
data, and nothing in ``tools/`` imports upward.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel

from caisson.client.models import StatResult
from caisson.client.primitives import SandboxClient
from caisson.config import SessionConfig
from caisson.policy import GrantStore, Policy, PolicyEngine
from caisson.policy.paths import is_secret

T = TypeVar("T")

# The secret patterns of a context without a policy engine (a handler called directly).
_DEFAULT_POLICY = Policy()

# Receives validated questions, returns answers keyed by question text (see tools/interaction.py).
InteractionHandler = Callable[[list[Any]], Awaitable[Mapping[str, Any]]]


@dataclass(frozen=True)
class CatalogEntry:
    """One tool the session offers, as tool_search shows it."""

    name: str
    description: str
    input_model: type[BaseModel]

    def schema(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "schema": self.input_model.model_json_schema()}


@dataclass(frozen=True)
class Probe:
    """A path as the dispatcher found it, moments before the handler runs, while resolving it
    for the policy (as the agent): its stat and, for a tool that asks (``prefetch``), the
    first bytes of a regular file the agent can read (``eof``: that is all of it)."""

    stat: StatResult
    head: bytes | None = None
    eof: bool = False


@dataclass(frozen=True)
class ToolContext:
    client: SandboxClient
    # Per-session state of tool modules (undo history, todos, shell state...), shared by calls.
    state: dict[str, Any]
    grants: GrantStore
    call_id: str = ""
    interaction_handler: InteractionHandler | None = None
    # The session's policy engine, for tools that ask for permission (ask_for_permissions).
    permissions: PolicyEngine | None = None
    # The tools this session offers under its profile's names; empty = every canonical tool.
    catalog: tuple[CatalogEntry, ...] = ()
    # The call's paths as the dispatcher probed them, by resolved container path.
    probes: Mapping[str, Probe] = field(default_factory=dict)
    # The policy decided on the call's paths as given, unresolved: a ``plain`` tool's handler
    # must raise NotPlain for any path that is not plain.
    plain: bool = False

    @property
    def config(self) -> SessionConfig:
        return self.client.config

    @property
    def session_id(self) -> str:
        return self.client.id

    @property
    def cwd(self) -> str:
        return self.client.cwd

    def resolve(self, path: str) -> str:
        """A container path, relative ones against the session's working directory."""
        return self.client.resolve(path)

    def probe(self, path: str) -> Probe | None:
        return self.probes.get(path)

    async def stat(self, path: str) -> StatResult:
        """The path's stat: the dispatcher's probe of it where there is one, else the daemon's."""
        probe = self.probe(path)
        return probe.stat if probe is not None else await self.client.stat(path)

    def is_secret(self, path: str) -> bool:
        """Whether the session's policy counts this container path as a secret's: a search
        must not show what a read of it would refuse."""
        policy = self.permissions.policy if self.permissions else _DEFAULT_POLICY
        return is_secret(path, policy.secret_patterns, policy.secret_exceptions) is not None

    def secret_name_globs(self) -> list[str]:
        """The last component of each of the policy's secret patterns: a file whose name
        matches none of them (regardless of case) is no secret's."""
        policy = self.permissions.policy if self.permissions else _DEFAULT_POLICY
        return sorted({pattern.rstrip("/").rpartition("/")[2] for pattern in policy.secret_patterns})

    def tool_state(self, key: str, factory: Callable[[], T]) -> T:
        """The session's state for ``key``, made by ``factory`` on first use."""
        if key not in self.state:
            self.state[key] = factory()
        return self.state[key]  # type: ignore[no-any-return]


class HasToolContext(Protocol):
    """A session (``caisson.Session``), as far as per-session tool settings need one."""

    def tool_context(self, call_id: str = "") -> ToolContext: ...
