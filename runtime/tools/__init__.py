"""Canonical tools. Importing this package registers every tool in ``REGISTRY``."""

from runtime.tools.base import REGISTRY, Tool, ToolError, ToolInput, ToolResult, tool
from runtime.tools import calculate, commands, discovery, git, interaction, planning, shell, tasks, web  # noqa: F401, I001
from runtime.tools import diffpatch, edit, files, grep, listing  # noqa: F401, I001  (registers tools)

__all__ = ["REGISTRY", "Tool", "ToolError", "ToolInput", "ToolResult", "tool"]
