"""The permission layer: every tool call passes here before the container sees it.

- :func:`classify_bash` gives a command line its level (safe / cautious / dangerous) and
  names known-destructive patterns;
- :class:`Policy` (TOML or JSON) says what a session may do;
- :class:`PolicyEngine` decides each :class:`CallRequest`, asking the embedding program's
  approval handler when needed and remembering session grants in a :class:`GrantStore`.
"""

from .bash import BashClassification, BashSegment, check_exec_metacharacters, classify_bash
from .calls import (
    ApprovalAnswer,
    ApprovalHandler,
    ApprovalRequest,
    CallRequest,
    Decision,
    PermissionAnswer,
    ResolvedPath,
)
from .engine import PolicyEngine
from .grants import Grant, GrantStore
from .levels import GrantLevel, Level
from .model import AUTO_APPROVE_ALL_ENV, Access, Effect, Policy, Rule
from .paths import DEFAULT_SECRET_PATTERNS, DEFAULT_WORKSPACE_ROOTS, glob_match, is_secret, is_within

__all__ = [
    "AUTO_APPROVE_ALL_ENV",
    "Access",
    "ApprovalAnswer",
    "ApprovalHandler",
    "ApprovalRequest",
    "BashClassification",
    "BashSegment",
    "CallRequest",
    "DEFAULT_SECRET_PATTERNS",
    "DEFAULT_WORKSPACE_ROOTS",
    "Decision",
    "Effect",
    "Grant",
    "GrantLevel",
    "GrantStore",
    "Level",
    "PermissionAnswer",
    "Policy",
    "PolicyEngine",
    "ResolvedPath",
    "Rule",
    "check_exec_metacharacters",
    "classify_bash",
    "glob_match",
    "is_secret",
    "is_within",
]
