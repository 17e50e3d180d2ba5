"""Exported tool schemas (OpenAI, Anthropic, MCP, plain JSON Schema) validate against the JSON
Schema meta-schema and match each specification's parameter tables: names, types, required
fields and defaults."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from runtime import CaissonError, Runtime
from runtime.profiles import PROFILES, get_profile
from runtime.profiles.export import FORMATS, export_tools, input_schema, prompt_text
from tests.conformance.conftest import profile_session

S, I, N, B, A, O = "string", "integer", "number", "boolean", "array", "object"


def req(kind: str) -> tuple[str, bool, Any]:
    return (kind, True, None)


def opt(kind: str, default: Any = None) -> tuple[str, bool, Any]:
    return (kind, False, default)


# Each specification's parameter tables: name -> (JSON type, required, default).
SPEC_TABLES: dict[str, dict[str, dict[str, tuple[str, bool, Any]]]] = {
    # Seed 000, "Input Schema" of each tool. multi_edit's dry_run and grep's multiline are
    # described in the tools' text ("Dry-run mode is available", "Multiline mode enables ...").
    "agent-air": {
        "read_file": {"file_path": req(S), "offset": opt(I, 0), "limit": opt(I, 2000)},
        "write_file": {"file_path": req(S), "content": req(S), "create_directories": opt(B, True)},
        "edit_file": {"file_path": req(S), "old_string": req(S), "new_string": req(S), "replace_all": opt(B, False),
                      "fuzzy_match": opt(B, False), "fuzzy_threshold": opt(N, 0.7)},
        "multi_edit": {"file_path": req(S), "edits": req(A), "dry_run": opt(B, False)},
        "ls": {"path": req(S), "long_format": opt(B, False), "include_hidden": opt(B, False), "pattern": opt(S),
               "sort_by": opt(S, "name"), "reverse": opt(B, False), "directories_first": opt(B, True)},
        "glob": {"pattern": req(S), "path": opt(S), "limit": opt(I, 1000), "include_hidden": opt(B, False)},
        "grep": {"pattern": req(S), "path": opt(S), "glob": opt(S), "type": opt(S),
                 "output_mode": opt(S, "files_with_matches"), "-i": opt(B, False), "-A": opt(I), "-B": opt(I),
                 "-C": opt(I), "-n": opt(B, True), "multiline": opt(B, False)},
        "bash": {"command": req(S), "timeout": opt(I, 120000), "working_dir": opt(S),
                 "run_in_background": opt(B, False), "background_timeout": opt(I), "env": opt(O)},
        "web_search": {"query": req(S)},
        "list_skills": {},
        "ask_user_questions": {"questions": req(A)},
        "ask_for_permissions": {"target_type": req(S), "target": req(S), "level": req(S), "recursive": opt(B, False),
                                "description": req(S), "reason": opt(S)},
        "markdown_plan": {"plan_id": opt(S), "title": req(S), "steps": req(A), "status": opt(S, "draft")},
        "update_plan_step": {"plan_id": req(S), "step": req(I), "status": req(S)},
        "list_plans": {},
        "read_plan": {"plan_id": req(S)},
    },
    # Seed 001, the "Schema" blocks (core six); the additional tools have no table in the seed.
    "amp": {
        "Read": {"path": req(S), "read_range": opt(A)},
        "edit_file": {"path": req(S), "old_str": req(S), "new_str": req(S), "replace_all": opt(B, False)},
        "create_file": {"path": req(S), "content": req(S)},
        "Bash": {"cmd": req(S), "cwd": opt(S)},
        "glob": {"filePattern": req(S), "limit": opt(N), "offset": opt(N)},
        "Grep": {"pattern": req(S), "path": opt(S), "glob": opt(S), "caseSensitive": opt(B), "literal": opt(B)},
    },
    # Seed 002: todo_write's example and tool_search's sketch; the fs tools' shapes (Grida's own
    # tool table: read_file {path}, edit_file {path, old_string, new_string, replace_all?, version},
    # write_file {path, content, version?}, list_files {}, grep_files {pattern, path_prefix?,
    # case_sensitive?}).
    "grida": {
        "read_file": {"path": req(S)},
        "edit_file": {"path": req(S), "old_string": req(S), "new_string": req(S), "replace_all": opt(B),
                      "version": req(S)},
        "write_file": {"path": req(S), "content": req(S), "version": opt(S)},
        "list_files": {},
        "grep_files": {"pattern": req(S), "path_prefix": opt(S), "case_sensitive": opt(B)},
        "todo_write": {"todos": req(A)},
        "tool_search": {"query": opt(S), "select": opt(A), "max_results": opt(I, 5), "mode": opt(S, "literal")},
    },
    # Seed 003, each tool's parameter table.
    "aar": {
        "read_file": {"path": req(S), "start_line": opt(I, 0), "end_line": opt(I, 0)},
        "write_file": {"path": req(S), "content": req(S)},
        "edit_file": {"path": req(S), "old_string": req(S), "new_string": req(S)},
        "list_directory": {"path": opt(S, ".")},
        "bash": {"command": req(S), "timeout": opt(I, 120)},
        "grep": {"regex": req(S), "include_pattern": opt(S, ""), "case_sensitive": opt(B, False),
                 "max_results": opt(I, 50)},
        "find_files": {"glob_pattern": req(S), "max_results": opt(I, 200)},
    },
    # Seed 004, each tool's "Field | Type | ..." table (file-edit: both modes' fields).
    "agentloop": {
        "calculate": {"expression": req(S)},
        "search": {"query": req(S)},
        "code-search": {"pattern": req(S), "mode": opt(S, "literal"), "path": opt(S, "."), "maxResults": opt(I, 50),
                        "contextLines": opt(I, 2), "fileGlob": opt(S)},
        "code_run": {"mode": req(S), "command": opt(S), "file": opt(S), "interpreter": opt(S), "cwd": opt(S),
                     "env": opt(O), "timeout": opt(N)},
        "shell": {"command": req(S), "cwd": opt(S), "env": opt(O), "timeout": opt(N)},
        "file-list": {"path": opt(S, "."), "glob": opt(S), "recursive": opt(B, False)},
        "file-read": {"path": req(S), "encoding": opt(S)},
        "file-write": {"path": req(S), "content": req(S), "encoding": opt(S, "utf-8")},
        "file-edit": {"path": req(S), "search": opt(S), "replace": opt(S), "startLine": opt(I), "endLine": opt(I),
                      "newContent": opt(S)},
        "file-delete": {"path": req(S)},
        "diff": {"original": req(S), "modified": req(S), "mode": opt(S, "strings"), "originalLabel": opt(S),
                 "modifiedLabel": opt(S)},
        "patch": {"path": req(S), "patch": req(S)},
        "git-status": {"cwd": opt(S)},
        "git-log": {"cwd": opt(S), "maxCount": opt(I, 20)},
        "git-diff": {"cwd": opt(S), "path": opt(S), "staged": opt(B, False)},
        "git-commit": {"message": req(S), "files": opt(A), "cwd": opt(S)},
        "git-branch": {"action": req(S), "branch": opt(S), "startPoint": opt(S), "force": opt(B), "cwd": opt(S)},
        "git-checkout": {"branch": req(S), "newBranch": opt(S), "cwd": opt(S)},
        "git-push": {"remote": opt(S), "branch": opt(S), "setUpstream": opt(B), "force": opt(B), "cwd": opt(S)},
        "plan": {"goal": req(S)},
        "run": {"plan": req(O), "onStepFailure": opt(S)},
        "plan-and-run": {"goal": req(S), "onStepFailure": opt(S)},
        "web_fetch": {"url": req(S), "extractMode": opt(S, "readability")},
    },
}


@pytest.mark.parametrize("profile", sorted(PROFILES))
@pytest.mark.parametrize("fmt", FORMATS)
def test_exported_schemas_are_valid(profile: str, fmt: str) -> None:
    """Issue 6, Schemas and prompts: the exported schemas validate with a JSON Schema validator."""
    for definition in export_tools(get_profile(profile), fmt):
        schema = {
            "openai": lambda d: d["function"]["parameters"],
            "anthropic": lambda d: d["input_schema"],
            "mcp": lambda d: d["inputSchema"],
            "json_schema": lambda d: d,
        }[fmt](definition)
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["type"] == "object"
        # Self-contained (no $ref into $defs) and optional fields shown as their plain type.
        assert "'$ref'" not in repr(schema) and "{'type': 'null'}" not in repr(schema)


def test_export_shapes() -> None:
    """Issue 6: OpenAI function-calling, Anthropic tool and MCP tool definitions."""
    tool = get_profile("aar").tools["grep"]
    schema = input_schema(tool)
    openai, anthropic, mcp, plain = (export_tools(get_profile("aar"), f)[5] for f in FORMATS)
    assert openai == {"type": "function", "function": {"name": "grep", "description": tool.description,
                                                       "parameters": schema}}
    assert anthropic == {"name": "grep", "description": tool.description, "input_schema": schema}
    assert mcp["name"] == "grep" and mcp["inputSchema"] == schema
    assert mcp["annotations"] == {"readOnlyHint": True, "destructiveHint": False, "openWorldHint": False}
    assert plain["title"] == "grep" and plain["$schema"].startswith("https://json-schema.org/")
    assert plain["x-caisson"]["level"] == "safe"
    with pytest.raises(CaissonError):
        export_tools(get_profile("aar"), "yaml")


@pytest.mark.parametrize("profile", sorted(SPEC_TABLES))
def test_schemas_match_spec_tables(profile: str) -> None:
    """Seeds 000-004: every table's tools exist with exactly the table's parameters, their JSON
    types, the required ones and the stated defaults."""
    tools = {t["title"]: t for t in export_tools(get_profile(profile), "json_schema")}
    for name, table in SPEC_TABLES[profile].items():
        schema = tools[name]
        props = schema["properties"]
        assert set(props) == set(table), name
        assert set(schema.get("required", [])) == {p for p, (_, required, _) in table.items() if required}, name
        for param, (kind, _, default) in table.items():
            assert props[param]["type"] == kind, (name, param)
            if default is not None:
                assert props[param]["default"] == default, (name, param)


def test_nested_tables() -> None:
    """Seed 000 multi_edit's edit object and ask_user_questions' question object; seed 001 Read's
    read_range (number items, exactly two) and glob's additionalProperties false; seed 002
    todo_write's item."""
    air = {t["title"]: t for t in export_tools(get_profile("agent-air"), "json_schema")}
    edit = air["multi_edit"]["properties"]["edits"]
    assert edit["maxItems"] == 50
    assert set(edit["items"]["properties"]) == {"old_string", "new_string", "replace_all", "fuzzy_match",
                                                "fuzzy_threshold"}
    assert set(edit["items"]["required"]) == {"old_string", "new_string"}
    question = air["ask_user_questions"]["properties"]["questions"]["items"]
    assert set(question["properties"]) == {"text", "type", "choices", "defaultValue", "required"}
    assert question["properties"]["type"]["enum"] == ["SingleChoice", "MultiChoice", "FreeText"]
    assert air["bash"]["properties"]["timeout"]["maximum"] == 600000
    amp = {t["title"]: t for t in export_tools(get_profile("amp"), "json_schema")}
    read_range = amp["Read"]["properties"]["read_range"]
    assert read_range["items"] == {"type": "number"} and read_range["minItems"] == read_range["maxItems"] == 2
    assert amp["glob"]["additionalProperties"] is False
    todo = {t["title"]: t for t in export_tools(get_profile("grida"), "json_schema")}["todo_write"]
    item = todo["properties"]["todos"]["items"]
    assert set(item["properties"]) == {"content", "activeForm", "status"}
    assert item["properties"]["status"]["enum"] == ["pending", "in_progress", "completed"]


def test_names_and_aliases() -> None:
    """Seed 001, Note on naming: Write -> create_file, Edit -> edit_file; every seed's tool names."""
    amp = get_profile("amp")
    assert amp.lookup("Write") is amp.tools["create_file"] and amp.lookup("Edit") is amp.tools["edit_file"]
    for profile, table in SPEC_TABLES.items():
        assert set(table) <= set(get_profile(profile).tools), profile


def test_prompt_text_lists_every_tool() -> None:
    """Seed 003, Tool-aware system prompt: "Available tools:" then "Guidelines:", for every profile."""
    for name in PROFILES:
        profile = get_profile(name)
        text = prompt_text(profile)
        assert text.startswith("Available tools:\n")
        for tool in profile.tools:
            assert f"\n- {tool}: " in text
        assert ("\n\nGuidelines:\n- " in text) == any(t.guidelines for t in profile.tools.values())


@pytest.mark.anyio
async def test_session_tools(rt: Runtime) -> None:
    """Issue 6: session.tools(format=...) exports the session's own profile."""
    async with profile_session(rt, "grida") as session:
        for fmt in FORMATS:
            assert session.tools(fmt) == export_tools(get_profile("grida"), fmt)
        assert [t["name"] for t in session.tools("anthropic")] == list(get_profile("grida").tools)
