"""A profile's tools as the definitions agent APIs take, and the prompt section seed 003 describes.

Formats: ``openai`` (function calling), ``anthropic`` (tool use), ``mcp`` (tools/list
entries) and ``json_schema`` (one plain JSON Schema document per tool). The schema is the
profile tool's input model, cleaned so it reads like the specification's parameter table:
aliases as property names (``-i``, ``-A``), no pydantic titles, optional fields as their
plain type, nested models inlined (some agent APIs do not resolve ``$ref``).
"""

from __future__ import annotations

import copy
from typing import Any

from caisson.errors import CaissonError
from caisson.profiles.base import Profile, ProfileTool

FORMATS = ("openai", "anthropic", "mcp", "json_schema")
JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"

# Keywords whose value is one schema, and those whose value is a list or map of schemas.
_ONE = ("items", "additionalProperties", "not", "contains", "propertyNames")
_LIST = ("anyOf", "oneOf", "allOf", "prefixItems")


def _level(tool: ProfileTool) -> str:
    level = tool.effective_level
    return str(getattr(level, "value", level))


def description(tool: ProfileTool) -> str:
    return tool.description or tool.canonical.description or tool.snippet


def input_schema(tool: ProfileTool) -> dict[str, Any]:
    """The tool's parameters as a self-contained JSON Schema object."""
    raw = tool.input_model.model_json_schema(by_alias=True)
    defs = raw.pop("$defs", {})
    schema = _clean(raw, defs)
    schema.setdefault("properties", {})
    schema["type"] = "object"
    return schema


def _clean(node: Any, defs: dict[str, Any]) -> Any:
    if not isinstance(node, dict):
        return node
    node = copy.deepcopy(node)
    ref = node.pop("$ref", None)
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        node = {**copy.deepcopy(defs[ref.removeprefix("#/$defs/")]), **node}
    node.pop("title", None)
    variants = node.get("anyOf")
    if isinstance(variants, list):
        kept = [v for v in variants if v != {"type": "null"}]
        # Optional[X] = None: the agent omits the field; the schema shows plain X.
        if len(kept) == 1 and len(kept) < len(variants):
            del node["anyOf"]
            node = {**_clean(kept[0], defs), **node}
            if node.get("default", 0) is None:
                del node["default"]
    if node.get("default", 0) is None:
        del node["default"]
    if isinstance(node.get("properties"), dict):
        node["properties"] = {k: _clean(v, defs) for k, v in node["properties"].items()}
    for key in _ONE:
        if isinstance(node.get(key), dict):
            node[key] = _clean(node[key], defs)
    for key in _LIST:
        if isinstance(node.get(key), list):
            node[key] = [_clean(v, defs) for v in node[key]]
    return node


def tool_definition(tool: ProfileTool, fmt: str) -> dict[str, Any]:
    schema = input_schema(tool)
    desc = description(tool)
    if fmt == "openai":
        return {"type": "function", "function": {"name": tool.name, "description": desc, "parameters": schema}}
    if fmt == "anthropic":
        return {"name": tool.name, "description": desc, "input_schema": schema}
    if fmt == "mcp":
        level = _level(tool)
        return {
            "name": tool.name,
            "description": desc,
            "inputSchema": schema,
            "annotations": {
                "readOnlyHint": tool.canonical.access in ("read", "none") and level == "safe",
                "destructiveHint": level == "dangerous",
                "openWorldHint": tool.canonical.access == "network",
            },
        }
    if fmt == "json_schema":
        return {
            "$schema": JSON_SCHEMA_DIALECT,
            "title": tool.name,
            "description": desc,
            **schema,
            # Unknown keywords are allowed in JSON Schema; these carry the permission facts.
            "x-caisson": {"level": _level(tool), "access": tool.canonical.access, "aliases": list(tool.aliases)},
        }
    raise CaissonError(f"unknown tool format {fmt!r}; choose one of: {', '.join(FORMATS)}")


def export_tools(profile: Profile, fmt: str = "json_schema") -> list[dict[str, Any]]:
    """Every tool of ``profile`` in ``fmt``, in the profile's order."""
    if fmt not in FORMATS:
        raise CaissonError(f"unknown tool format {fmt!r}; choose one of: {', '.join(FORMATS)}")
    return [tool_definition(t, fmt) for t in profile.tools.values()]


def prompt_text(profile: Profile) -> str:
    """The system-prompt section: "Available tools:" with each snippet, then "Guidelines:"."""
    lines = ["Available tools:"]
    guidelines: list[str] = []
    for tool in profile.tools.values():
        snippet = tool.snippet or description(tool).split("\n", 1)[0]
        lines.append(f"- {tool.name}: {snippet}")
        guidelines.extend(g for g in tool.guidelines if g not in guidelines)
    if guidelines:
        lines += ["", "Guidelines:", *(f"- {g}" for g in guidelines)]
    return "\n".join(lines)
