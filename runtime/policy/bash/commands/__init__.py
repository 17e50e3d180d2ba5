"""Per-command knowledge: which commands and options read, write, run code or reach the
network. Each module registers its rules in :data:`HANDLERS` on import."""

from . import builtins, files, git, readonly, scripts, search, wrappers  # noqa: F401  (registration)
from .registry import HANDLERS

__all__ = ["HANDLERS"]
