"""Per-command knowledge: which commands and options read, write, run code or reach the
network. Each module registers its rules in :data:`HANDLERS` on import."""

from . import builtins, files, git, readonly, scripts, search, wrappers  # noqa: F401  (registration)
from .registry import DOWNLOADERS, HANDLERS, INTERPRETERS, SHELLS, STD_BIN_DIRS, VERSION_PROBES, Handler, register

__all__ = ["DOWNLOADERS", "HANDLERS", "INTERPRETERS", "SHELLS", "STD_BIN_DIRS", "VERSION_PROBES", "Handler", "register"]
