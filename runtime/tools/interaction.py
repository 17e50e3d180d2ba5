"""User interaction: ask_user_questions and ask_for_permissions.

Both reach the user through the session's **interaction handler**, which the embedding
program supplies (``interaction_handler`` of ``Runtime.open_session``, handed to tools in their context)::

    async def handler(questions: list[Question]) -> Mapping[str, str | list[str] | None]:
        ...

It receives the validated questions and returns the user's answers keyed by question
text: a string (SingleChoice, FreeText), a list of strings (MultiChoice; any type may
use a list), or None / "" / [] for no answer. Answers need not be among the choices:
users may type their own. Questions left out of the mapping are unanswered.

ask_for_permissions goes through the permission policy's approval handler when the
session has one (``PolicyEngine.request_permission``); otherwise it asks one SingleChoice
question (allow once / allow for this session / deny) through the interaction handler,
where any other answer denies, with the answer as the user's message. Either way the
grant lands in the permission layer's grant store (``ctx.grants``), so the policy
honours it for later calls (a once-grant for the next call it covers), and a request an
existing grant covers is answered without asking.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field

from caisson.policy import Grant, GrantLevel, GrantStore, Level, PermissionAnswer
from caisson.tools.base import ToolError, ToolInput, ToolResult, tool
from caisson.tools.text import shown_json

if TYPE_CHECKING:
    from caisson.tools.context import ToolContext

QuestionType = Literal["SingleChoice", "MultiChoice", "FreeText"]
Answer = str | list[str] | None


class Question(ToolInput):
    text: str = Field(min_length=1, description="Question text")
    type: QuestionType = Field(description="SingleChoice, MultiChoice or FreeText")
    choices: list[str] = Field(default_factory=list, description="Options for choice questions (non-empty)")
    default_value: str | None = Field(None, alias="defaultValue", description="Default answer for FreeText questions")
    required: bool = Field(False, description="Whether an answer is required")


InteractionHandler = Callable[[list[Question]], Awaitable[Mapping[str, Answer]]]


class ValidationIssue(BaseModel):
    code: Literal[
        "required_field_empty", "too_many_selections", "empty_choices", "unknown_question", "duplicate_question"
    ]
    question: str
    message: str


def check_questions(questions: list[Question]) -> list[ValidationIssue]:
    """What is wrong with the questions before they are shown (empty choice lists, duplicates)."""
    issues = []
    seen: set[str] = set()
    for q in questions:
        if q.type != "FreeText" and not q.choices:
            issues.append(ValidationIssue(
                code="empty_choices", question=q.text, message=f"{q.type} question {q.text!r} has no choices"
            ))
        if q.text in seen:
            issues.append(ValidationIssue(
                code="duplicate_question", question=q.text, message=f"question {q.text!r} is asked twice"
            ))
        seen.add(q.text)
    return issues


def _selections(answer: Answer) -> list[str]:
    if answer is None:
        return []
    items = [answer] if isinstance(answer, str) else list(answer)
    return [item for item in items if item.strip()]


def check_answers(
    questions: list[Question], answers: Mapping[str, Answer]
) -> tuple[dict[str, Answer], list[ValidationIssue]]:
    """The normalised answers (FreeText defaults applied) and what is wrong with them."""
    issues = []
    known = {q.text for q in questions}
    for text in answers:
        if text not in known:
            issues.append(ValidationIssue(
                code="unknown_question", question=text, message=f"answer to a question that was not asked: {text!r}"
            ))
    result: dict[str, Answer] = {}
    for q in questions:
        picked = _selections(answers.get(q.text))
        if not picked and q.type == "FreeText" and q.default_value:
            picked = [q.default_value]
        if q.required and not picked:
            issues.append(ValidationIssue(
                code="required_field_empty", question=q.text, message=f"required question {q.text!r} has no answer"
            ))
        if q.type == "SingleChoice" and len(picked) > 1:
            issues.append(ValidationIssue(
                code="too_many_selections", question=q.text,
                message=f"SingleChoice question {q.text!r} has {len(picked)} selections; at most one is allowed",
            ))
        if q.type == "MultiChoice":
            result[q.text] = picked
        else:
            result[q.text] = picked[0] if picked else None
    return result, issues


def _is_answer(value: object) -> bool:
    if value is None or isinstance(value, str):
        return True
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _invalid(issues: list[ValidationIssue]) -> ToolResult:
    payload = {"errors": [i.model_dump() for i in issues]}
    message = "Validation failed: " + "; ".join(f"{i.code}: {i.message}" for i in issues)
    return ToolResult.failure(issues[0].code, message, payload)


def _handler(ctx: ToolContext, tool_name: str) -> InteractionHandler:
    handler = ctx.interaction_handler
    if handler is None:
        raise ToolError(
            "no_interaction_handler",
            f"{tool_name} needs a user to answer, but this session has no interaction handler "
            "(pass interaction_handler when opening the session).",
        )
    return handler


async def _ask(ctx: ToolContext, tool_name: str, questions: list[Question]) -> Mapping[str, Answer]:
    answers = await _handler(ctx, tool_name)(questions)
    if not isinstance(answers, Mapping) or not all(isinstance(k, str) and _is_answer(v) for k, v in answers.items()):
        raise ToolError(
            "invalid_answers",
            "the interaction handler must return a mapping of question text to a string, a list of strings or None",
        )
    return answers


class AskUserQuestionsInput(ToolInput):
    questions: list[Question] = Field(min_length=1, description="Questions to ask the user")


@tool(
    "ask_user_questions",
    AskUserQuestionsInput,
    level=Level.SAFE,
    access="none",
    snippet="Ask the user structured questions (SingleChoice, MultiChoice, FreeText) and wait for the answers",
)
async def ask_user_questions(ctx: ToolContext, args: AskUserQuestionsInput) -> ToolResult:
    issues = check_questions(args.questions)
    if issues:
        return _invalid(issues)
    raw = await _ask(ctx, "ask_user_questions", args.questions)
    answers, issues = check_answers(args.questions, raw)
    if issues:
        return _invalid(issues)
    data = {"answers": [{"question": q.text, "type": q.type, "answer": answers[q.text]} for q in args.questions]}
    return ToolResult.success(shown_json({"answers": answers}, indent=2), data)


# ---- permissions ----------------------------------------------------------------------------------

ALLOW_ONCE = "Allow once"
ALLOW_SESSION = "Allow for this session"
DENY = "Deny"
GRANT_FIELDS = {"id", "target_type", "target", "level", "recursive", "once"}


class AskForPermissionsInput(ToolInput):
    target_type: Literal["path", "domain", "command"] = Field(description="What is accessed: path, domain or command")
    target: str = Field(min_length=1, description="The resource being accessed")
    level: Literal["read", "write", "execute", "admin"] = Field(description="read, write, execute or admin")
    recursive: bool = Field(False, description="For paths: include everything below it")
    description: str = Field(min_length=1, description="What will be done, in plain words")
    reason: str | None = Field(None, description="Why it is needed")


async def _ask_user(
    ctx: ToolContext, grants: GrantStore, grant: Grant, args: AskForPermissionsInput
) -> PermissionAnswer:
    """The same flow as PolicyEngine.request_permission, asked through the interaction handler."""
    existing = grants.covering(grant)
    if existing is not None:
        return PermissionAnswer(granted=True, scope="once" if existing.once else "session", grant=existing)
    below = " and everything below it" if args.recursive and args.target_type == "path" else ""
    text = f"Allow {args.level} access to {args.target_type} {args.target}{below}? {args.description}"
    if args.reason:
        text += f" (Reason: {args.reason})"
    question = Question(text=text, type="SingleChoice", choices=[ALLOW_ONCE, ALLOW_SESSION, DENY], required=True)
    picked = _selections((await _ask(ctx, "ask_for_permissions", [question])).get(question.text))
    choice = picked[0] if len(picked) == 1 else None
    if choice not in (ALLOW_ONCE, ALLOW_SESSION):
        # A typed answer instead of a choice denies, and is passed on as the user's message.
        message = None if choice == DENY else ("; ".join(picked) or None)
        return PermissionAnswer(granted=False, message=message)
    once = choice == ALLOW_ONCE
    stored = grants.add(grant.model_copy(update={"once": once, "granted_by": "user"}))
    return PermissionAnswer(granted=True, scope="once" if once else "session", grant=stored)


@tool(
    "ask_for_permissions",
    AskForPermissionsInput,
    level=Level.SAFE,
    access="none",
    snippet="Ask the user for permission on a path, domain or command (once or for the whole session)",
)
async def ask_for_permissions(ctx: ToolContext, args: AskForPermissionsInput) -> ToolResult:
    grants = ctx.grants
    grant = Grant(
        target_type=args.target_type, target=args.target, level=GrantLevel(args.level),
        recursive=args.recursive, description=args.description,
    )
    engine = ctx.permissions
    if engine is not None and engine.approval_handler is not None:
        # The approval handler of the permission policy answers; grants land in the same store.
        answer = await engine.request_permission(
            grant, tenant=ctx.config.tenant, session_id=ctx.session_id, call_id=ctx.call_id or "c-" + uuid.uuid4().hex[:12],
            description=args.description, reason=args.reason,
        )
    elif ctx.interaction_handler is not None:
        answer = await _ask_user(ctx, grants, grant, args)
    else:
        raise ToolError(
            "no_interaction_handler",
            "ask_for_permissions needs someone to answer: this session has neither an approval handler "
            "nor an interaction handler.",
        )
    data = {
        "granted": answer.granted,
        "scope": answer.scope,
        "message": answer.message,
        "grant": answer.grant.model_dump(mode="json", include=GRANT_FIELDS) if answer.grant else None,
    }
    summary = {"granted": answer.granted, "scope": answer.scope, "message": answer.message}
    return ToolResult.success(shown_json(summary), data)
