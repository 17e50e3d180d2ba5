"""Permission levels and the default level of every canonical tool."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType


class _RankedStrEnum(StrEnum):
    """A StrEnum ordered by declaration, not alphabetically (str's own ordering)."""

    @property
    def rank(self) -> int:
        return list(type(self)).index(self)

    def _rank_of(self, other: object) -> int | None:
        if isinstance(other, type(self)):
            return other.rank
        return None

    def __lt__(self, other: object) -> bool:
        rank = self._rank_of(other)
        return NotImplemented if rank is None else self.rank < rank

    def __le__(self, other: object) -> bool:
        rank = self._rank_of(other)
        return NotImplemented if rank is None else self.rank <= rank

    def __gt__(self, other: object) -> bool:
        rank = self._rank_of(other)
        return NotImplemented if rank is None else self.rank > rank

    def __ge__(self, other: object) -> bool:
        rank = self._rank_of(other)
        return NotImplemented if rank is None else self.rank >= rank

    __hash__ = StrEnum.__hash__


class Level(_RankedStrEnum):
    """Risk of a tool call: safe < cautious < dangerous."""

    SAFE = "safe"
    CAUTIOUS = "cautious"
    DANGEROUS = "dangerous"


class GrantLevel(_RankedStrEnum):
    """Access a session grant covers (ask_for_permissions): read < write < execute < admin."""

    READ = "read"
    WRITE = "write"
    EXECUTE = "execute"
    ADMIN = "admin"


_S, _C, _D = Level.SAFE, Level.CAUTIOUS, Level.DANGEROUS

# Seed 004 (AgentLoop) names the level of: calculate, web_search, grep (code-search), run_code
# (code_run), exec (shell), ls (file-list), read_file, write_file, edit_file, delete_file, diff,
# apply_patch (patch), git_status/log/diff/commit/branch/checkout/push and web_fetch. The rest
# follow their side effect: reads and searches safe, writes cautious, deletes/execution dangerous.
DEFAULT_LEVELS: Mapping[str, Level] = MappingProxyType(
    {
        "read_file": _S,
        "write_file": _C,
        "edit_file": _C,
        "multi_edit": _C,
        "undo_edit": _C,
        "delete_file": _D,
        "diff": _S,
        "apply_patch": _C,
        "ls": _S,
        "glob": _S,
        "grep": _S,
        # Declared level only: a bash call's effective level is its command's classification.
        "bash": _D,
        "task_output": _S,
        # Feeding stdin to a running process is command execution.
        "task_input": _D,
        # Signals only the agent's own background tasks inside the sandbox.
        "task_kill": _C,
        "task_list": _S,
        "run_code": _D,
        "exec": _D,
        "git_status": _S,
        "git_log": _S,
        "git_diff": _S,
        "git_commit": _C,
        "git_branch": _C,
        "git_checkout": _C,
        "git_push": _D,
        # Host-side session state, no file written.
        "todo_write": _S,
        # Writes plan files under .agent-air/plans/ in the workspace.
        "markdown_plan": _C,
        "update_plan_step": _C,
        "list_plans": _S,
        "read_plan": _S,
        "ask_user_questions": _S,
        # The grant it asks for goes through the approval handler itself.
        "ask_for_permissions": _S,
        "tool_search": _S,
        "list_skills": _S,
        "calculate": _S,
        "web_fetch": _C,
        "web_search": _S,
    }
)


def default_level(tool_name: str) -> Level:
    """The default level of a canonical tool; unknown tools are dangerous (fail closed)."""
    return DEFAULT_LEVELS.get(tool_name, Level.DANGEROUS)
