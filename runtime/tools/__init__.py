"""Canonical tools. Importing this package registers every tool in ``REGISTRY``."""

from runtime.tools import (  # noqa: F401, I001  # noqa: F401, I001  (registers tools)
    calculate,
    commands,
    diffpatch,
    discovery,
    edit,
    files,
    git,
    grep,
    interaction,
    listing,
    planning,
    shell,
    tasks,
    web,
)
from runtime.tools.base import REGISTRY, Tool, ToolError, ToolInput, ToolResult, tool

__all__ = ["REGISTRY", "Tool", "ToolError", "ToolInput", "ToolResult", "tool"]
