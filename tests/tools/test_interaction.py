"""ask_user_questions (every validation code), ask_for_permissions (session grants shared
with the permission policy), tool_search and list_skills."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest
from toolcall import call, code

from caisson import Runtime, Session
from caisson.policy import ApprovalAnswer, ApprovalRequest, GrantLevel
from caisson.tools.base import REGISTRY
from caisson.tools.discovery import configure_skills, parse_front_matter
from caisson.tools.interaction import ALLOW_ONCE, ALLOW_SESSION, Answer, Question

pytestmark = pytest.mark.anyio


class Scripted:
    """An interaction handler that answers from a script and records what it was asked."""

    def __init__(self, *replies: Mapping[str, Answer]) -> None:
        self.replies = list(replies)
        self.asked: list[list[Question]] = []

    async def __call__(self, questions: list[Question]) -> Mapping[str, Answer]:
        self.asked.append(questions)
        return self.replies.pop(0)


DB = {"text": "Which database?", "type": "SingleChoice", "choices": ["PostgreSQL", "SQLite"], "required": True}
FEATURES = {"text": "Which features?", "type": "MultiChoice", "choices": ["auth", "search", "billing"]}
NOTES = {"text": "Anything else?", "type": "FreeText", "defaultValue": "no"}


# ---- ask_user_questions -------------------------------------------------------------------------


async def test_answers_come_back_through_the_handler(session: Session) -> None:
    handler = Scripted({"Which database?": "PostgreSQL", "Which features?": ["auth", "search"]})
    session.interaction_handler = handler
    r = await call(session, "ask_user_questions", questions=[DB, FEATURES, NOTES])
    assert r.ok, r.text
    assert json.loads(r.text) == {
        "answers": {"Which database?": "PostgreSQL", "Which features?": ["auth", "search"], "Anything else?": "no"}
    }
    asked = handler.asked[0]
    assert [q.type for q in asked] == ["SingleChoice", "MultiChoice", "FreeText"]
    assert asked[2].default_value == "no" and asked[0].required


async def test_custom_answers_are_allowed(session: Session) -> None:
    session.interaction_handler = Scripted({"Which database?": "DuckDB"})
    r = await call(session, "ask_user_questions", questions=[DB])
    assert r.ok and r.data["answers"][0]["answer"] == "DuckDB"


async def test_required_field_empty(session: Session) -> None:
    session.interaction_handler = Scripted({"Which database?": []})
    r = await call(session, "ask_user_questions", questions=[DB])
    assert not r.ok and code(r) == "required_field_empty"
    assert r.data["errors"][0]["question"] == "Which database?"


async def test_too_many_selections(session: Session) -> None:
    session.interaction_handler = Scripted({"Which database?": ["PostgreSQL", "SQLite"]})
    r = await call(session, "ask_user_questions", questions=[DB])
    assert not r.ok and code(r) == "too_many_selections"


async def test_empty_choices_is_caught_before_asking(session: Session) -> None:
    handler = Scripted()
    session.interaction_handler = handler
    r = await call(session, "ask_user_questions", questions=[{"text": "Pick", "type": "MultiChoice", "choices": []}])
    assert not r.ok and code(r) == "empty_choices"
    assert handler.asked == []


async def test_unknown_question(session: Session) -> None:
    session.interaction_handler = Scripted({"Which database?": "SQLite", "Something never asked": "x"})
    r = await call(session, "ask_user_questions", questions=[DB])
    assert not r.ok and code(r) == "unknown_question"
    assert "Something never asked" in r.text


async def test_no_handler_is_a_clear_error(session: Session) -> None:
    session.interaction_handler = None
    r = await call(session, "ask_user_questions", questions=[DB])
    assert not r.ok and code(r) == "no_interaction_handler" and "interaction handler" in r.text


async def test_a_handler_returning_garbage_is_refused(session: Session) -> None:
    async def bad(questions: list[Question]) -> Any:
        return ["not", "a", "mapping"]

    session.interaction_handler = bad
    r = await call(session, "ask_user_questions", questions=[DB])
    assert not r.ok and code(r) == "invalid_answers"


# ---- ask_for_permissions ---------------------------------------------------------------------------

PERMISSION = {
    "target_type": "path",
    "target": "/workspace/config",
    "level": "write",
    "recursive": True,
    "description": "Write the database configuration",
    "reason": "You asked for PostgreSQL",
}


async def test_session_grant_is_stored_and_reused(session: Session) -> None:
    asked: list[Question] = []

    async def answer(questions: list[Question]) -> Mapping[str, Answer]:
        asked.extend(questions)
        return {questions[0].text: ALLOW_SESSION}

    session.interaction_handler = answer
    r = await call(session, "ask_for_permissions", **PERMISSION)
    assert r.ok and json.loads(r.text) == {"granted": True, "scope": "session", "message": None}
    assert r.data["grant"]["target"] == "/workspace/config" and r.data["grant"]["level"] == "write"
    question = asked[0]
    assert question.choices == [ALLOW_ONCE, ALLOW_SESSION, "Deny"]
    assert "write access to path /workspace/config" in question.text and "You asked for PostgreSQL" in question.text
    # The permission policy sees the same grant.
    assert session.grants.match("path", "/workspace/config/db.toml", GrantLevel.WRITE) is not None
    assert session.grants.match("path", "/workspace/config/db.toml", GrantLevel.ADMIN) is None
    narrower = {**PERMISSION, "target": "/workspace/config/sub", "level": "read"}
    again = await call(session, "ask_for_permissions", **narrower)
    assert again.data["granted"] and len(asked) == 1


async def test_once_and_deny(session: Session) -> None:
    replies = iter([ALLOW_ONCE, "Deny", "not now, ask me tomorrow"])

    async def answer(questions: list[Question]) -> Mapping[str, Answer]:
        return {questions[0].text: next(replies)}

    session.interaction_handler = answer
    cmd = {"target_type": "command", "target": "make deploy", "level": "execute", "description": "Deploy"}
    once = await call(session, "ask_for_permissions", **cmd)
    assert once.data["granted"] and once.data["scope"] == "once"
    # A once-grant is used up by the first call it approves.
    assert session.grants.match("command", "make deploy", GrantLevel.EXECUTE, consume=True) is not None
    assert session.grants.match("command", "make deploy", GrantLevel.EXECUTE) is None
    denied = await call(session, "ask_for_permissions", **cmd)
    assert not denied.data["granted"] and denied.data["message"] is None
    typed = await call(session, "ask_for_permissions", **cmd)
    assert not typed.data["granted"] and typed.data["message"] == "not now, ask me tomorrow"


async def test_permission_goes_through_the_approval_handler_when_there_is_one(rt: Runtime) -> None:
    requests: list[ApprovalRequest] = []

    async def approve(request: ApprovalRequest) -> ApprovalAnswer:
        requests.append(request)
        return ApprovalAnswer.allow_session(approver="alice")

    async with rt.session(approval_handler=approve) as s:
        r = await call(s, "ask_for_permissions", target_type="domain", target="*.example.com", level="read",
                       description="Fetch the docs")
        assert r.data["granted"] and r.data["scope"] == "session"
        assert requests[0].kind == "permission" and requests[0].domain == "*.example.com"
        assert requests[0].description == "Fetch the docs"
        assert s.grants.match("domain", "docs.example.com", GrantLevel.READ) is not None


# ---- tool_search -----------------------------------------------------------------------------------


async def test_tool_search_by_query_ranks_names_first(shared_session: Session) -> None:
    r = await call(shared_session, "tool_search", query="git commit", max_results=3)
    assert r.ok
    names = [t["name"] for t in r.data["tools"]]
    assert names[0] == "git_commit" and len(names) <= 3
    schema = r.data["tools"][0]["schema"]
    assert "message" in schema["properties"] and r.data["tools"][0]["description"]
    r = await call(shared_session, "tool_search", query="background task output")
    assert r.data["tools"][0]["name"] == "task_output"
    r = await call(shared_session, "tool_search", query="zzzz qqqq")
    assert r.ok and r.data["tools"] == [] and r.text == "No matching tools."


async def test_tool_search_select_exact_names(shared_session: Session) -> None:
    r = await call(shared_session, "tool_search", select=["bash", "calculate", "NoSuchTool"])
    assert [t["name"] for t in r.data["tools"]] == ["bash", "calculate"]
    assert r.data["not_found"] == ["NoSuchTool"]
    with pytest.raises(ValueError):
        REGISTRY["tool_search"].input_model.model_validate({})


# ---- list_skills ----------------------------------------------------------------------------------------


async def test_list_skills(session: Session) -> None:
    r = await call(session, "list_skills")
    assert r.ok and r.text == "No skills available."
    await session.write_file(
        "/workspace/.agent-air/skills/pdf/SKILL.md",
        "---\nname: pdf-tools\ndescription: \"Extract text and tables from PDF files\"\n---\n# PDF\n",
    )
    await session.write_file(
        "/workspace/.claude/skills/review/SKILL.md",
        "---\ndescription: >\n  Review a pull request\n  for style.\n---\nbody\n",
    )
    await session.write_file("/workspace/.agent-air/skills/README.md", "not a skill")
    r = await call(session, "list_skills")
    assert json.loads(r.text) == [
        {"name": "pdf-tools", "description": "Extract text and tables from PDF files",
         "path": "/workspace/.agent-air/skills/pdf/SKILL.md"},
        {"name": "review", "description": "Review a pull request for style.",
         "path": "/workspace/.claude/skills/review/SKILL.md"},
    ]
    configure_skills(session, ["/opt/none"])
    r = await call(session, "list_skills")
    assert r.text == "No skills available."


def test_front_matter() -> None:
    assert parse_front_matter("no front matter") == {}
    assert parse_front_matter("---\nname: 'x'\nextra: y z\n---\n") == {"name": "x", "extra": "y z"}
