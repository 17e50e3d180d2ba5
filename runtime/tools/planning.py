"""Planning: todo_write (a per-session list, replaced whole on every call) and durable
markdown plans (markdown_plan, update_plan_step, list_plans, read_plan) stored as files
in the workspace, ``.agent-air/plans/plan-NNN.md`` by default.

Concurrent calls are safe: an anyio.Lock per plan file (and one for allocating ids)
serialises this session's calls, and every write is a compare-and-swap on the content
that was read, so a writer in another session (or the agent's own shell) is never
silently overwritten: the tool re-reads and retries instead.
"""

from __future__ import annotations

import contextlib
import posixpath
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Literal

import anyio
from pydantic import Field

from caisson.errors import OpError
from caisson.policy import Level
from caisson.tools.base import ToolError, ToolInput, ToolResult, tool
from caisson.tools.text import shown_name

if TYPE_CHECKING:
    from caisson.tools.context import HasToolContext, ToolContext

# ---- todos ------------------------------------------------------------------------------------

TodoStatus = Literal["pending", "in_progress", "completed"]
TODO_MARKS = {"pending": "[ ]", "in_progress": "[~]", "completed": "[x]"}


class TodoItem(ToolInput):
    content: str = Field(min_length=1, description="What to do, imperative (e.g. 'Add a star')")
    active_form: str = Field(
        min_length=1, alias="activeForm", description="Present continuous form shown while in progress ('Adding ...')"
    )
    status: TodoStatus = Field(description="pending, in_progress or completed")


class TodoWriteInput(ToolInput):
    todos: list[TodoItem] = Field(description="The complete todo list; it replaces the previous one")


def render_todos(todos: list[TodoItem]) -> str:
    if not todos:
        return "Todo list cleared."
    done = sum(t.status == "completed" for t in todos)
    lines = [f"Todos ({done}/{len(todos)} completed):"]
    for t in todos:
        lines.append(f"{TODO_MARKS[t.status]} {t.active_form if t.status == 'in_progress' else t.content}")
    return "\n".join(lines)


@tool(
    "todo_write",
    TodoWriteInput,
    level=Level.SAFE,
    access="none",
    snippet="Plan and track work: pass the complete todo list every call (one item in_progress at a time)",
    guidelines=("Update the todo list as you work: mark one item in_progress at a time, completed when done.",),
)
async def todo_write(ctx: ToolContext, args: TodoWriteInput) -> ToolResult:
    # Seed 002: "Exactly one in_progress at a time. Enforced socially by the prompt": the list
    # is kept as given, and the agent is told it drifted.
    active = [t.content for t in args.todos if t.status == "in_progress"]
    warning = (
        f"Warning: {len(active)} todos are in_progress ({'; '.join(active)}); keep exactly one in_progress at a time."
        if len(active) > 1
        else None
    )
    store: dict[str, list[TodoItem]] = ctx.tool_state("planning.todos", dict)
    previous = store.get("todos", [])
    store["todos"] = list(args.todos)
    counts: Counter[str] = Counter(t.status for t in args.todos)
    data = {
        "todos": [t.model_dump(by_alias=True) for t in args.todos],
        "previous": [t.model_dump(by_alias=True) for t in previous],
        "counts": {s: counts.get(s, 0) for s in TODO_MARKS},
        "warning": warning,
    }
    text = render_todos(args.todos)
    return ToolResult.success(f"{text}\n\n{warning}" if warning else text, data)


# ---- markdown plans ------------------------------------------------------------------------------

StepStatus = Literal["pending", "in_progress", "completed", "skipped"]
PlanStatus = Literal["draft", "active", "completed", "abandoned"]
STEP_MARKS: dict[str, str] = {"pending": " ", "in_progress": "~", "completed": "x", "skipped": "-"}
MARK_STEPS = {v: k for k, v in STEP_MARKS.items()}
PLAN_ID = re.compile(r"plan-\d{3,}")
PLAN_FILE = re.compile(r"(plan-\d{3,})\.md")
STEP_LINE = re.compile(r"^(\d+)\. \[([ ~x\-])\] ?(.*)$")
META_LINE = re.compile(r"^- \*\*(ID|Status|Created):\*\* (.*)$")
CAS_ATTEMPTS = 8


@dataclass
class Step:
    description: str
    notes: str = ""
    status: str = "pending"


@dataclass
class Plan:
    id: str
    title: str
    status: str
    created: str
    steps: list[Step] = field(default_factory=list)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def render_plan(plan: Plan) -> str:
    lines = [
        f"# {_one_line(plan.title)}",
        "",
        f"- **ID:** {plan.id}",
        f"- **Status:** {plan.status}",
        f"- **Created:** {plan.created}",
        "",
        "## Steps",
        "",
    ]
    for number, step in enumerate(plan.steps, 1):
        lines.append(f"{number}. [{STEP_MARKS[step.status]}] {_one_line(step.description)}")
        for note in step.notes.strip("\n").split("\n") if step.notes.strip() else []:
            lines.append(f"   > {note}".rstrip())
    return "\n".join(lines) + "\n"


def parse_plan(text: str, plan_id: str = "") -> Plan:
    """A plan back from its markdown; tolerant of hand edits (unknown lines are ignored)."""
    plan = Plan(id=plan_id, title="", status="draft", created="")
    for line in text.splitlines():
        if line.startswith("# ") and not plan.title:
            plan.title = line[2:].strip()
            continue
        meta = META_LINE.match(line)
        if meta:
            key, value = meta.group(1), meta.group(2).strip()
            if key == "ID":
                plan.id = plan.id or value
            elif key == "Status":
                plan.status = value
            else:
                plan.created = value
            continue
        step = STEP_LINE.match(line)
        if step:
            plan.steps.append(Step(step.group(3).strip(), status=MARK_STEPS[step.group(2)]))
            continue
        if plan.steps and line.startswith("   >"):
            note = line[4:].removeprefix(" ")
            last = plan.steps[-1]
            last.notes = f"{last.notes}\n{note}" if last.notes else note
    return plan


def set_step_mark(text: str, step: int, status: str) -> str:
    """``text`` with only the checkbox of the ``step``-th step line changed (hand edits kept)."""
    lines = text.split("\n")
    seen = 0
    for i, line in enumerate(lines):
        match = STEP_LINE.match(line)
        if match:
            seen += 1
            if seen == step:
                start, end = match.span(2)
                lines[i] = line[:start] + STEP_MARKS[status] + line[end:]
                break
    return "\n".join(lines)


def progress(plan: Plan) -> dict[str, int]:
    counts = Counter(s.status for s in plan.steps)
    return {status: counts.get(status, 0) for status in STEP_MARKS}


def describe_progress(plan: Plan) -> str:
    counts = progress(plan)
    total = len(plan.steps)
    text = f"{counts['completed']}/{total} completed"
    used = [s for s in ("completed", "in_progress", "pending", "skipped") if counts[s]]
    if len(used) > 1:
        text += " (" + ", ".join(f"{counts[s]} {s.replace('_', ' ')}" for s in used) + ")"
    return text


@dataclass
class PlanSettings:
    # Relative to the workspace root (SessionConfig.workdir), or absolute.
    directory: str = ".agent-air/plans"


def plan_settings(ctx: ToolContext) -> PlanSettings:
    return ctx.tool_state("planning.settings", PlanSettings)


def configure_plans(session: HasToolContext, directory: str) -> None:
    """Store this session's plans under ``directory`` (e.g. ``.agent-air/plans``)."""
    plan_settings(session.tool_context()).directory = directory


class PlanStore:
    """The plan files of one session's workspace, with per-file locks."""

    def __init__(self, ctx: ToolContext) -> None:
        self.ctx = ctx
        self.locks: dict[str, anyio.Lock] = ctx.tool_state("planning.locks", dict)

    @property
    def directory(self) -> str:
        return posixpath.normpath(posixpath.join(self.ctx.config.workdir, plan_settings(self.ctx).directory))

    def path(self, plan_id: str) -> str:
        if not PLAN_ID.fullmatch(plan_id):
            raise ToolError("invalid_plan_id", f"invalid plan id {plan_id!r}: plan ids look like plan-001")
        return posixpath.join(self.directory, f"{plan_id}.md")

    def lock(self, key: str) -> anyio.Lock:
        return self.locks.setdefault(key, anyio.Lock())

    async def ids(self) -> list[str]:
        try:
            entries = await self.ctx.client.list_dir(self.directory)
        except OpError as exc:
            if exc.code in ("not_found", "not_a_directory"):
                return []
            raise
        found = [m.group(1) for e in entries if e.type == "file" and (m := PLAN_FILE.fullmatch(e.name))]
        return sorted(found, key=lambda i: int(i.split("-")[1]))

    async def read(self, plan_id: str) -> tuple[Plan, str, str]:
        """The plan, the file's text and its sha256."""
        try:
            # The policy never looks at plan paths: a plan is read only as a plain file, never
            # through a link (or as another name of a file) that could be a secret's.
            got = await self.ctx.client.read_range(self.path(plan_id), hash=True, plain=True)
        except OpError as exc:
            if exc.code == "not_found":
                raise ToolError(
                    "plan_not_found", f"Plan {plan_id} not found. Use list_plans to see the available plan IDs."
                ) from None
            if exc.code == "not_plain":
                raise ToolError("not_plain", f"Plan {plan_id} is not a plain file ({exc.message}); it is left alone") from None
            raise
        text = got.data.decode("utf-8", "replace")
        return parse_plan(text, plan_id), text, got.sha256 or ""

    async def create(self, title: str, steps: list[Step], status: str) -> Plan:
        async with self.lock(self.directory):
            taken = await self.ids()
            number = int(taken[-1].split("-")[1]) + 1 if taken else 1
            if not taken:  # the directory may be missing, and a plain write makes none
                try:
                    # Plain too: a link planted on the way would have it made in a guarded place.
                    await self.ctx.client.mkdir(self.directory, plain=True)
                except OpError as exc:
                    if exc.code == "not_plain":
                        raise ToolError("not_plain", f"Cannot make {self.directory}: {exc.message}") from None
                    raise
            for _ in range(CAS_ATTEMPTS):
                plan = Plan(f"plan-{number:03d}", title, status, _now(), steps)
                try:
                    # "" = the file must not exist: a plan created elsewhere meanwhile is never
                    # replaced. Plain: never written through a link to a path the policy guards.
                    await self.ctx.client.write_file(
                        self.path(plan.id), render_plan(plan), expected_sha256="", plain=True
                    )
                    return plan
                except OpError as exc:
                    if exc.code == "not_plain":
                        raise ToolError("not_plain", f"Cannot create {self.path(plan.id)}: {exc.message}") from None
                    if exc.code not in ("conflict", "exists"):
                        raise
                    number += 1
        raise ToolError("conflict", "could not allocate a plan id: the plans directory keeps changing")

    async def modify(self, plan_id: str, change: Callable[[Plan, str], str]) -> Plan:
        """Read a plan, compute its new text with ``change(plan, text)`` and write it back;
        retried when the file changed in between."""
        async with self.lock(self.path(plan_id)):
            for _ in range(CAS_ATTEMPTS):
                plan, text, sha = await self.read(plan_id)
                new_text = change(plan, text)
                try:
                    await self.ctx.client.write_file(self.path(plan_id), new_text, expected_sha256=sha, plain=True)
                    return parse_plan(new_text, plan_id)
                except OpError as exc:
                    if exc.code != "conflict":
                        raise
        raise ToolError("conflict", f"plan {plan_id} kept changing while it was being updated; try again")


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _summary(plan: Plan) -> dict[str, object]:
    return {
        "id": plan.id,
        "title": plan.title,
        "status": plan.status,
        "created": plan.created,
        "steps": len(plan.steps),
        "progress": progress(plan),
        "progress_text": describe_progress(plan),
    }


class PlanStepInput(ToolInput):
    description: str = Field(min_length=1, description="Step description")
    notes: str | None = Field(None, description="Optional notes for the step")


class MarkdownPlanInput(ToolInput):
    plan_id: str | None = Field(None, description="Plan ID to overwrite (e.g. plan-001); omit to create a new plan")
    title: str = Field(min_length=1, description="Plan title")
    steps: list[PlanStepInput] = Field(min_length=1, description="Steps, in order (at least one)")
    status: PlanStatus = Field("draft", description="draft, active, completed or abandoned")


@tool(
    "markdown_plan",
    MarkdownPlanInput,
    level=Level.CAUTIOUS,
    access="write",
    snippet="Create (or overwrite by id) a durable markdown plan in the workspace; ids are plan-001, plan-002, ...",
)
async def markdown_plan(ctx: ToolContext, args: MarkdownPlanInput) -> ToolResult:
    store = PlanStore(ctx)
    steps = [Step(s.description, s.notes or "") for s in args.steps]
    if args.plan_id is None:
        plan = await store.create(args.title, steps, args.status)
        verb = "Created"
    else:

        def overwrite(current: Plan, text: str) -> str:
            return render_plan(Plan(current.id, args.title, args.status, current.created or _now(), steps))

        plan = await store.modify(args.plan_id, overwrite)
        verb = "Updated"
    path = store.path(plan.id)
    text = f"{verb} plan {plan.id} ({len(plan.steps)} steps, {plan.status}) at {path}\n\n{render_plan(plan)}"
    return ToolResult.success(text, {**_summary(plan), "path": path, "markdown": render_plan(plan)})


class UpdatePlanStepInput(ToolInput):
    plan_id: str = Field(description="Plan ID (e.g. plan-001)")
    step: int = Field(description="Step number, 1-based")
    status: StepStatus = Field(description="pending, in_progress, completed or skipped")


@tool(
    "update_plan_step",
    UpdatePlanStepInput,
    level=Level.CAUTIOUS,
    access="write",
    snippet="Set the status of one step of a markdown plan ([ ] pending, [~] in_progress, [x] completed, [-] skipped)",
)
async def update_plan_step(ctx: ToolContext, args: UpdatePlanStepInput) -> ToolResult:
    store = PlanStore(ctx)

    def set_step(plan: Plan, text: str) -> str:
        if not 1 <= args.step <= len(plan.steps):
            raise ToolError(
                "step_out_of_range",
                f"Step {args.step} is out of range: plan {args.plan_id} has {len(plan.steps)} steps "
                f"(numbered 1 to {len(plan.steps)}).",
            )
        return set_step_mark(text, args.step, args.status)

    plan = await store.modify(args.plan_id, set_step)
    step = plan.steps[args.step - 1]
    text = (
        f"Plan {plan.id} step {args.step} is now {args.status} [{STEP_MARKS[args.status]}]: {step.description}\n"
        f"Progress: {describe_progress(plan)}"
    )
    return ToolResult.success(text, {**_summary(plan), "step": args.step, "step_status": args.status})


class ListPlansInput(ToolInput):
    pass


@tool(
    "list_plans",
    ListPlansInput,
    level=Level.SAFE,
    access="read",
    snippet="List the workspace's markdown plans with status and progress",
)
async def list_plans(ctx: ToolContext, args: ListPlansInput) -> ToolResult:
    store = PlanStore(ctx)
    ids = await store.ids()
    plans: dict[str, Plan] = {}

    async def load(plan_id: str) -> None:
        with contextlib.suppress(ToolError):  # removed between the listing and the read, or not plain
            plans[plan_id] = (await store.read(plan_id))[0]

    async with anyio.create_task_group() as tg:
        for plan_id in ids:
            tg.start_soon(load, plan_id)
    loaded = [plans[i] for i in ids if i in plans]
    if not loaded:
        return ToolResult.success("No plans found. Use markdown_plan to create one.", {"plans": []})
    lines = [
        f"{shown_name(p.id)}: {shown_name(p.title)} [{p.status}] created {p.created}, {len(p.steps)} steps, "
        f"{describe_progress(p)}"
        for p in loaded
    ]
    return ToolResult.success("\n".join(lines), {"plans": [_summary(p) for p in loaded]})


class ReadPlanInput(ToolInput):
    plan_id: str = Field(description="Plan ID to read (e.g. plan-001)")


@tool(
    "read_plan",
    ReadPlanInput,
    level=Level.SAFE,
    access="read",
    snippet="Read a markdown plan by id",
)
async def read_plan(ctx: ToolContext, args: ReadPlanInput) -> ToolResult:
    store = PlanStore(ctx)
    plan, markdown, _ = await store.read(args.plan_id)
    return ToolResult.success(markdown, {**_summary(plan), "markdown": markdown})
