"""Canonical tools, one module per tool or close family, grouped by kind (files, search,
process, git, web, planning, interaction, discovery, calculate). A tool is declared once
(``base.py``: input model, level, access, prompt snippet, handler) and handed a
``ToolContext`` (``context.py``), never the session. Importing this package registers every
tool in ``REGISTRY``."""

from caisson.tools import calculate, discovery, git, interaction, planning  # noqa: F401  (registers tools)
from caisson.tools.base import REGISTRY, Tool, ToolError, ToolInput, ToolResult, tool
from caisson.tools.files import edit, patch, read_write  # noqa: F401
from caisson.tools.process import commands, shell, tasks  # noqa: F401
from caisson.tools.search import grep, listing  # noqa: F401
from caisson.tools.web import fetch, search  # noqa: F401

__all__ = ["REGISTRY", "Tool", "ToolError", "ToolInput", "ToolResult", "tool"]
