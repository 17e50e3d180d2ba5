"""Discovery: tool_search (find the session's tools by text or exact name, with their full
schemas) and list_skills (SKILL.md files under the configured skill directories)."""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
from pydantic import Field, model_validator
from rapidfuzz import fuzz

from caisson.errors import OpError
from caisson.policy import Level
from caisson.tools.base import REGISTRY, ToolInput, ToolResult, tool
from caisson.tools.context import CatalogEntry, HasToolContext, ToolContext
from caisson.tools.text import shown_json


def catalog(ctx: ToolContext) -> list[CatalogEntry]:
    """The tools this session offers: its profile's when the dispatcher named them, else every canonical tool."""
    if ctx.catalog:
        return list(ctx.catalog)
    return [CatalogEntry(t.name, t.description, t.input_model) for t in REGISTRY.values()]


def _words(text: str) -> list[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", text)
    return [w for w in re.split(r"[^a-z0-9]+", spaced.lower()) if w]


def score(entry: CatalogEntry, query: str) -> float:
    """How well ``entry`` matches ``query``: name hits weigh most, then description hits,
    then near-misses (typos) on the name."""
    name = entry.name.lower()
    name_words = set(_words(entry.name))
    desc = entry.description.lower()
    desc_words = set(_words(entry.description))
    phrase = " ".join(_words(query))
    total = 0.0
    if phrase and (phrase.replace(" ", "_") == name or phrase.replace(" ", "") == name.replace("_", "")):
        total += 100
    elif phrase and phrase in desc:
        total += 8
    for word in _words(query):
        if word in name_words:
            total += 10
        elif word in name:
            total += 5
        elif fuzz.partial_ratio(word, name) >= 85 and len(word) > 3:
            total += 2
        if word in desc_words:
            total += 3
        elif word in desc:
            total += 1
    return total


class ToolSearchInput(ToolInput):
    query: str | None = Field(None, description="Free-text intent, e.g. 'run a shell command'")
    select: list[str] | None = Field(None, description="Exact tool names to fetch the schemas of")
    max_results: int = Field(5, ge=1, le=100, description="Most tools to return for a query")
    mode: Literal["literal", "semantic"] = Field(
        "literal", description="literal: text match on name and description (semantic falls back to literal)"
    )

    @model_validator(mode="after")
    def _one_shape(self) -> ToolSearchInput:
        if (self.query is None) == (self.select is None):
            raise ValueError("give exactly one of `query` and `select`")
        return self


@tool(
    "tool_search",
    ToolSearchInput,
    level=Level.SAFE,
    access="none",
    snippet="Find this session's tools by intent (query) or exact names (select); returns their full schemas",
)
async def tool_search(ctx: ToolContext, args: ToolSearchInput) -> ToolResult:
    entries = catalog(ctx)
    missing: list[str] = []
    if args.select is not None:
        by_name = {e.name: e for e in entries}
        by_lower = {e.name.lower(): e for e in entries}
        found = []
        for name in args.select:
            entry = by_name.get(name) or by_lower.get(name.lower())
            if entry is None:
                missing.append(name)
            elif entry not in found:
                found.append(entry)
    else:
        scored = [(score(e, args.query or ""), e) for e in entries]
        ranked = sorted((s for s in scored if s[0] > 0), key=lambda s: (-s[0], s[1].name))
        found = [e for _, e in ranked[: args.max_results]]
    tools = [e.schema() for e in found]
    data: dict[str, Any] = {"tools": tools}
    if missing:
        data["not_found"] = missing
    if args.mode == "semantic":
        data["note"] = "semantic search is not available in this sandbox; literal matching was used"
    if not tools:
        text = "No matching tools." + (f" Unknown: {', '.join(missing)}." if missing else "")
        return ToolResult.success(text, data)
    return ToolResult.success(shown_json(data, indent=2), data)


# ---- skills -------------------------------------------------------------------------------------


@dataclass
class SkillSettings:
    # Relative to the workspace root (SessionConfig.workdir), or absolute.
    directories: list[str] = field(default_factory=lambda: [".agent-air/skills", ".claude/skills", "skills"])


def skill_settings(ctx: ToolContext) -> SkillSettings:
    return ctx.tool_state("discovery.skills", SkillSettings)


def configure_skills(session: HasToolContext, directories: list[str]) -> None:
    """Look for SKILL.md files under ``directories`` in this session's sandbox."""
    skill_settings(session.tool_context()).directories = list(directories)


def parse_front_matter(text: str) -> dict[str, str]:
    """The ``key: value`` pairs of a leading ``---`` block (plain, quoted or folded values)."""
    lines = text.lstrip("\ufeff").splitlines()
    if not lines or lines[0].strip() != "---":
        return {}
    meta: dict[str, str] = {}
    key = None
    for line in lines[1:]:
        if line.strip() in ("---", "..."):
            break
        match = re.match(r"^([A-Za-z_][\w-]*):\s*(.*)$", line)
        if match:
            key, value = match.group(1), match.group(2).strip()
            meta[key] = "" if value in (">", "|", ">-", "|-") else value.strip("\"'")
        elif key and line[:1].isspace():
            meta[key] = (meta[key] + " " + line.strip()).strip()
    return meta


class ListSkillsInput(ToolInput):
    pass


@tool(
    "list_skills",
    ListSkillsInput,
    level=Level.SAFE,
    access="read",
    snippet="List the available skills (SKILL.md files): name, description, path",
)
async def list_skills(ctx: ToolContext, args: ListSkillsInput) -> ToolResult:
    files: list[str] = []
    for directory in skill_settings(ctx).directories:
        root = posixpath.normpath(posixpath.join(ctx.config.workdir, directory))
        try:
            walked = await ctx.client.walk(root, include_hidden=True, max_entries=20_000, ignore_files=())
        except OpError:
            continue
        files += [
            posixpath.join(root, e.path)
            for e in walked.entries
            if e.type == "file" and posixpath.basename(e.path) == "SKILL.md"
        ]
    skills: list[dict[str, str]] = []

    async def load(path: str) -> None:
        try:
            # Found by a walk, not shown to the policy: read only as a plain file (not through
            # a link, nor as another name of a file) that could be a secret's.
            text = (await ctx.client.read_range(path, 0, 64 * 1024, plain=True)).data.decode("utf-8", "replace")
        except OpError:
            return
        meta = parse_front_matter(text)
        name = meta.get("name") or posixpath.basename(posixpath.dirname(path))
        skills.append({"name": name, "description": meta.get("description", ""), "path": path})

    async with anyio.create_task_group() as tg:
        for path in dict.fromkeys(files):
            tg.start_soon(load, path)
    if not skills:
        return ToolResult.success("No skills available.", {"skills": []})
    skills.sort(key=lambda s: (s["name"], s["path"]))
    return ToolResult.success(shown_json(skills, indent=2), {"skills": skills})
