"""The per-session policy: a pydantic model loadable from TOML or JSON."""

from __future__ import annotations

import json
import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .levels import Level
from .paths import (
    DEFAULT_PROTECTED_PATHS,
    DEFAULT_SECRET_EXCEPTIONS,
    DEFAULT_SECRET_PATTERNS,
    DEFAULT_WORKSPACE_ROOTS,
    glob_match,
)

# What a call does to its targets; "none" = touches no file, command or host (calculate, todos...).
Access = Literal["read", "write", "execute", "delete", "network", "none"]

AUTO_APPROVE_ALL_ENV = "AUTO_APPROVE_ALL"
POLICY_FILE_ENV = "CAISSON_POLICY"
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"", "0", "false", "no", "off"})


Effect = Literal["allow", "ask", "deny"]


class Rule(BaseModel):
    """Allow, ask or deny the calls that match every criterion the rule sets.

    - ``tool``: glob on the canonical tool name or the profile's name for it.
    - ``path``: glob on the call's paths (see :func:`caisson.policy.paths.glob_match`). Deny
      and ask rules match when any requested or resolved path matches; allow rules only when
      every resolved path does.
    - ``command``: prefix of a command, on word boundaries (``git push`` matches
      ``git push -f`` but not ``git pushx``); ``command_regex``: full match. Both are tried
      on each command of a compound line (quotes removed) and, for deny and ask, on the
      whole line. An allow rule covers only the commands it matches: ``pytest && curl …``
      is not allowed by a ``pytest`` rule, and redirections are never covered.
    - ``access``: restrict to some kinds of access (read, write, execute, delete, network).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str | None = None
    effect: Effect
    tool: str | None = None
    path: str | None = None
    command: str | None = None
    command_regex: str | None = None
    access: list[Access] | None = None
    message: str | None = None

    @field_validator("command_regex")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"invalid command_regex: {exc}") from exc
        return value

    @model_validator(mode="after")
    def _has_criterion(self) -> Self:
        if not any((self.tool, self.path, self.command, self.command_regex, self.access)):
            raise ValueError("a rule needs at least one of tool, path, command, command_regex, access")
        return self


class Policy(BaseModel):
    """What a session may do. Defaults: auto-approve up to cautious, allow everything up to
    dangerous (with approval), confine file tools to /workspace and /tmp, block secret files.

    ``auto_approve_all`` is the AUTO_APPROVE_ALL=true override: dangerous calls are approved
    without asking (explicit ``ask`` rules still ask; ``deny`` rules, ``max_level``,
    workspace confinement, secret files and destructive commands still deny).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = "default"
    auto_approve: Level = Level.CAUTIOUS
    auto_approve_all: bool = False
    max_level: Level = Level.DANGEROUS
    rules: list[Rule] = []
    workspace_roots: list[str] = Field(default_factory=lambda: list(DEFAULT_WORKSPACE_ROOTS))
    secret_patterns: list[str] = Field(default_factory=lambda: list(DEFAULT_SECRET_PATTERNS))
    secret_exceptions: list[str] = Field(default_factory=lambda: list(DEFAULT_SECRET_EXCEPTIONS))
    # Writes to these paths count as dangerous: git, shells and other programs run what they say.
    protected_paths: list[str] = Field(default_factory=lambda: list(DEFAULT_PROTECTED_PATHS))
    # Hosts a tool may send requests to (web_fetch) without approval: "example.com" covers its
    # subdomains too. Anything else leaves the host as data (the URL, its query) and is dangerous.
    allowed_domains: list[str] = []
    # Per-tool overrides of the declared level (canonical names).
    tool_levels: dict[str, Level] = {}
    # Seconds an approval handler has to answer; no answer in time is a deny.
    approval_timeout: float = Field(default=300.0, gt=0)

    @field_validator("workspace_roots")
    @classmethod
    def _absolute(cls, roots: list[str]) -> list[str]:
        for root in roots:
            if not root.startswith("/"):
                raise ValueError(f"workspace root {root!r} must be an absolute container path")
        return roots

    @property
    def effective_auto_approve(self) -> Level:
        return Level.DANGEROUS if self.auto_approve_all else self.auto_approve

    def rule_name(self, index: int) -> str:
        rule = self.rules[index]
        return rule.name or f"rules[{index}]"

    def path_rule_for_change(self, path: str, access: Access) -> tuple[str, Rule] | None:
        """The first deny or ask rule that binds a change of ``path`` made outside any tool
        call (a hosted tenant's file routes): a rule naming no tool and no command, whose path,
        if it has one, matches and whose access, if it names any, includes ``access``. Such a
        change has no call to ask approval for, so an ask rule refuses it as a deny rule does.
        Rules naming a tool or a command are about calls, which the engine decides."""
        for index, rule in enumerate(self.rules):
            if rule.effect == "allow" or rule.tool or rule.command or rule.command_regex:
                continue
            if (rule.access is None or access in rule.access) and (rule.path is None or glob_match(rule.path, path)):
                return self.rule_name(index), rule
        return None

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Policy:
        """Load a policy from a .toml or .json file."""
        p = Path(path)
        suffix = p.suffix.lower()
        if suffix == ".toml":
            with p.open("rb") as fh:
                data = tomllib.load(fh)
        elif suffix == ".json":
            with p.open("rb") as fh:
                data = json.load(fh)
        else:
            raise ValueError(f"policy file must be .toml or .json, got {p.name}")
        return cls.model_validate(data)

    @classmethod
    def from_env(cls, base: Policy | None = None, environ: Mapping[str, str] | None = None) -> Policy:
        """Apply environment overrides.

        ``CAISSON_POLICY`` names a policy file used when no ``base`` is given;
        ``AUTO_APPROVE_ALL=true`` (also 1/yes/on) approves dangerous calls without asking.
        Any other value than true/false-like is an error rather than a silent default.
        """
        env = os.environ if environ is None else environ
        if base is None:
            file = env.get(POLICY_FILE_ENV)
            base = cls.load(file) if file else cls()
        raw = env.get(AUTO_APPROVE_ALL_ENV)
        if raw is None:
            return base
        value = raw.strip().lower()
        if value in _TRUE:
            return base.model_copy(update={"auto_approve_all": True})
        if value in _FALSE:
            return base
        raise ValueError(f"{AUTO_APPROVE_ALL_ENV} must be true or false, got {raw!r}")
