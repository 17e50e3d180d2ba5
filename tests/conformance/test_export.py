"""Exported tool schemas (OpenAI, Anthropic, MCP, plain JSON Schema) validate against the JSON
Schema meta-schema and match each specification's parameter tables: names, types, required
fields and defaults."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from caisson import CaissonError, Runtime
from caisson.profiles import PROFILES, get_profile
from caisson.profiles.export import FORMATS, export_tools, input_schema, prompt_text
from tests.conformance.conftest import profile_session

STR, INT, NUM, BOOL, ARR, OBJ = "string", "integer", "number", "boolean", "array", "object"


def req(kind: str) -> tuple[str, bool, Any]:
    return (kind, True, None)


def opt(kind: str, default: Any = None) -> tuple[str, bool, Any]:
    return (kind, False, default)


# Each specification's parameter tables: name -> (JSON type, required, default).
SPEC_TABLES: dict[str, dict[str, dict[str, tuple[str, bool, Any]]]] = {
    # Seed 000, "Input Schema" of each tool. multi_edit's dry_run and grep's multiline are
    # described in the tools' text ("Dry-run mode is available", "Multiline mode enables ...").
    "agent-air": {
        "read_file": {"file_path": req(STR), "offset": opt(INT, 0), "limit": opt(INT, 2000)},
        "write_file": {"file_path": req(STR), "content": req(STR), "create_directories": opt(BOOL, True)},
        "edit_file": {"file_path": req(STR), "old_string": req(STR), "new_string": req(STR), "replace_all": opt(BOOL, False),
                      "fuzzy_match": opt(BOOL, False), "fuzzy_threshold": opt(NUM, 0.7)},
        "multi_edit": {"file_path": req(STR), "edits": req(ARR), "dry_run": opt(BOOL, False)},
        "ls": {"path": req(STR), "long_format": opt(BOOL, False), "include_hidden": opt(BOOL, False), "pattern": opt(STR),
               "sort_by": opt(STR, "name"), "reverse": opt(BOOL, False), "directories_first": opt(BOOL, True)},
        "glob": {"pattern": req(STR), "path": opt(STR), "limit": opt(INT, 1000), "include_hidden": opt(BOOL, False)},
        "grep": {"pattern": req(STR), "path": opt(STR), "glob": opt(STR), "type": opt(STR),
                 "output_mode": opt(STR, "files_with_matches"), "-i": opt(BOOL, False), "-A": opt(INT), "-B": opt(INT),
                 "-C": opt(INT), "-n": opt(BOOL, True), "multiline": opt(BOOL, False)},
        "bash": {"command": req(STR), "timeout": opt(INT, 120000), "working_dir": opt(STR),
                 "run_in_background": opt(BOOL, False), "background_timeout": opt(INT), "env": opt(OBJ)},
        "web_search": {"query": req(STR)},
        "list_skills": {},
        "ask_user_questions": {"questions": req(ARR)},
        "ask_for_permissions": {"target_type": req(STR), "target": req(STR), "level": req(STR), "recursive": opt(BOOL, False),
                                "description": req(STR), "reason": opt(STR)},
        "markdown_plan": {"plan_id": opt(STR), "title": req(STR), "steps": req(ARR), "status": opt(STR, "draft")},
        "update_plan_step": {"plan_id": req(STR), "step": req(INT), "status": req(STR)},
        "list_plans": {},
        "read_plan": {"plan_id": req(STR)},
    },
    # Seed 001, the "Schema" blocks (core six); the additional tools have no table in the seed.
    "amp": {
        "Read": {"path": req(STR), "read_range": opt(ARR)},
        "edit_file": {"path": req(STR), "old_str": req(STR), "new_str": req(STR), "replace_all": opt(BOOL, False)},
        "create_file": {"path": req(STR), "content": req(STR)},
        "Bash": {"cmd": req(STR), "cwd": opt(STR)},
        "glob": {"filePattern": req(STR), "limit": opt(NUM), "offset": opt(NUM)},
        "Grep": {"pattern": req(STR), "path": opt(STR), "glob": opt(STR), "caseSensitive": opt(BOOL), "literal": opt(BOOL)},
    },
    # Seed 002: todo_write's example and tool_search's sketch; the fs tools' shapes (Grida's own
    # tool table: read_file {path}, edit_file {path, old_string, new_string, replace_all?, version},
    # write_file {path, content, version?}, list_files {}, grep_files {pattern, path_prefix?,
    # case_sensitive?}).
    "grida": {
        "read_file": {"path": req(STR)},
        "edit_file": {"path": req(STR), "old_string": req(STR), "new_string": req(STR), "replace_all": opt(BOOL),
                      "version": req(STR)},
        "write_file": {"path": req(STR), "content": req(STR), "version": opt(STR)},
        "list_files": {},
        "grep_files": {"pattern": req(STR), "path_prefix": opt(STR), "case_sensitive": opt(BOOL)},
        "todo_write": {"todos": req(ARR)},
        "tool_search": {"query": opt(STR), "select": opt(ARR), "max_results": opt(INT, 5), "mode": opt(STR, "literal")},
    },
    # Seed 003, each tool's parameter table.
    "aar": {
        "read_file": {"path": req(STR), "start_line": opt(INT, 0), "end_line": opt(INT, 0)},
        "write_file": {"path": req(STR), "content": req(STR)},
        "edit_file": {"path": req(STR), "old_string": req(STR), "new_string": req(STR)},
        "list_directory": {"path": opt(STR, ".")},
        "bash": {"command": req(STR), "timeout": opt(INT, 120)},
        "grep": {"regex": req(STR), "include_pattern": opt(STR, ""), "case_sensitive": opt(BOOL, False),
                 "max_results": opt(INT, 50)},
        "find_files": {"glob_pattern": req(STR), "max_results": opt(INT, 200)},
    },
    # Seed 004, each tool's "Field | Type | ..." table (file-edit: both modes' fields).
    "agentloop": {
        "calculate": {"expression": req(STR)},
        "search": {"query": req(STR)},
        "code-search": {"pattern": req(STR), "mode": opt(STR, "literal"), "path": opt(STR, "."), "maxResults": opt(INT, 50),
                        "contextLines": opt(INT, 2), "fileGlob": opt(STR)},
        "code_run": {"mode": req(STR), "command": opt(STR), "file": opt(STR), "interpreter": opt(STR), "cwd": opt(STR),
                     "env": opt(OBJ), "timeout": opt(NUM)},
        "shell": {"command": req(STR), "cwd": opt(STR), "env": opt(OBJ), "timeout": opt(NUM)},
        "file-list": {"path": opt(STR, "."), "glob": opt(STR), "recursive": opt(BOOL, False)},
        "file-read": {"path": req(STR), "encoding": opt(STR)},
        "file-write": {"path": req(STR), "content": req(STR), "encoding": opt(STR, "utf-8")},
        "file-edit": {"path": req(STR), "search": opt(STR), "replace": opt(STR), "startLine": opt(INT), "endLine": opt(INT),
                      "newContent": opt(STR)},
        "file-delete": {"path": req(STR)},
        "diff": {"original": req(STR), "modified": req(STR), "mode": opt(STR, "strings"), "originalLabel": opt(STR),
                 "modifiedLabel": opt(STR)},
        "patch": {"path": req(STR), "patch": req(STR)},
        "git-status": {"cwd": opt(STR)},
        "git-log": {"cwd": opt(STR), "maxCount": opt(INT, 20)},
        "git-diff": {"cwd": opt(STR), "path": opt(STR), "staged": opt(BOOL, False)},
        "git-commit": {"message": req(STR), "files": opt(ARR), "cwd": opt(STR)},
        "git-branch": {"action": req(STR), "branch": opt(STR), "startPoint": opt(STR), "force": opt(BOOL), "cwd": opt(STR)},
        "git-checkout": {"branch": req(STR), "newBranch": opt(STR), "cwd": opt(STR)},
        "git-push": {"remote": opt(STR), "branch": opt(STR), "setUpstream": opt(BOOL), "force": opt(BOOL), "cwd": opt(STR)},
        "plan": {"goal": req(STR)},
        "run": {"plan": req(OBJ), "onStepFailure": opt(STR)},
        "plan-and-run": {"goal": req(STR), "onStepFailure": opt(STR)},
        "web_fetch": {"url": req(STR), "extractMode": opt(STR, "readability")},
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
    async with profile_session(rt, "grida", "runc") as session:
        for fmt in FORMATS:
            assert session.tools(fmt) == export_tools(get_profile("grida"), fmt)
        assert [t["name"] for t in session.tools("anthropic")] == list(get_profile("grida").tools)
