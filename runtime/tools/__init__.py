"""Canonical tools. Importing this package registers every tool in ``REGISTRY``."""

from runtime.tools.base import REGISTRY, Tool, ToolError, ToolInput, ToolResult, tool

__all__ = ["REGISTRY", "Tool", "ToolError", "ToolInput", "ToolResult", "tool"]
