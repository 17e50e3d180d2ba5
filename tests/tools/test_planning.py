"""todo_write and markdown plans against real sessions, including concurrent calls."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from toolcall import call, code

from caisson import Session
from caisson.tools.base import REGISTRY
from caisson.tools.planning import (
    Plan,
    PlanStore,
    Step,
    configure_plans,
    parse_plan,
    render_plan,
    set_step_mark,
)

pytestmark = pytest.mark.anyio
PLANS = "/workspace/.agent-air/plans"


def todo(content: str, status: str) -> dict[str, str]:
    return {"content": content, "activeForm": content + "ing", "status": status}


# ---- todos ----------------------------------------------------------------------------------


async def test_todo_write_replaces_the_whole_list(session: Session) -> None:
    r = await call(session, "todo_write", todos=[todo("Add a star", "in_progress"), todo("Test", "pending")])
    assert r.ok
    assert r.text == "Todos (0/2 completed):\n[~] Add a staring\n[ ] Test"
    assert r.data["todos"][0] == {"content": "Add a star", "activeForm": "Add a staring", "status": "in_progress"}
    r = await call(session, "todo_write", todos=[todo("Test", "completed")])
    assert [t["content"] for t in r.data["todos"]] == ["Test"]
    assert [t["content"] for t in r.data["previous"]] == ["Add a star", "Test"]
    assert r.data["counts"] == {"pending": 0, "in_progress": 0, "completed": 1}
    r = await call(session, "todo_write", todos=[])
    assert r.ok and r.text == "Todo list cleared."


async def test_todo_write_keeps_two_in_progress_with_a_warning(session: Session) -> None:
    """Seed 002: "Exactly one in_progress at a time. Enforced socially by the prompt"."""
    await call(session, "todo_write", todos=[todo("Keep", "pending")])
    r = await call(session, "todo_write", todos=[todo("A", "in_progress"), todo("B", "in_progress")])
    assert r.ok and "A; B" in r.text and "exactly one in_progress" in r.text
    assert r.data["warning"] and [t["content"] for t in r.data["todos"]] == ["A", "B"]
    r = await call(session, "todo_write", todos=[todo("A", "completed")])
    assert [t["content"] for t in r.data["previous"]] == ["A", "B"] and r.data["warning"] is None


async def test_todos_are_per_session(session: Session, shared_session: Session) -> None:
    await call(session, "todo_write", todos=[todo("mine", "pending")])
    r = await call(shared_session, "todo_write", todos=[todo("theirs", "pending")])
    assert all(t["content"] != "mine" for t in r.data["previous"])


async def test_todo_input_is_validated() -> None:
    model = REGISTRY["todo_write"].input_model
    with pytest.raises(ValueError):
        model.model_validate({"todos": [{"content": "x", "activeForm": "x", "status": "done"}]})
    with pytest.raises(ValueError):
        model.model_validate({"todos": [{"content": "x", "status": "pending"}]})


# ---- markdown plans ------------------------------------------------------------------------------


async def test_create_read_update_list(session: Session) -> None:
    empty = await call(session, "list_plans")
    assert empty.ok and empty.text == "No plans found. Use markdown_plan to create one."
    r = await call(
        session,
        "markdown_plan",
        title="Refactor authentication module",
        steps=[
            {"description": "Extract auth logic", "notes": "Watch out for circular dependencies"},
            {"description": "Add unit tests"},
            {"description": "Update API routes"},
        ],
        status="active",
    )
    assert r.ok and r.data["id"] == "plan-001" and r.data["path"] == f"{PLANS}/plan-001.md"
    text = (await session.read_file(f"{PLANS}/plan-001.md")).decode()
    assert text.startswith("# Refactor authentication module\n")
    assert "- **ID:** plan-001" in text and "- **Status:** active" in text and "- **Created:** 20" in text
    assert "1. [ ] Extract auth logic\n   > Watch out for circular dependencies\n2. [ ] Add unit tests" in text

    for step, status in ((1, "completed"), (2, "in_progress"), (3, "skipped"), (3, "pending")):
        r = await call(session, "update_plan_step", plan_id="plan-001", step=step, status=status)
        assert r.ok, r.text
    text = (await session.read_file(f"{PLANS}/plan-001.md")).decode()
    assert "1. [x] Extract auth logic" in text and "2. [~] Add unit tests" in text and "3. [ ] Update" in text

    bad = await call(session, "update_plan_step", plan_id="plan-001", step=4, status="completed")
    assert not bad.ok and code(bad) == "step_out_of_range" and "has 3 steps" in bad.text
    bad = await call(session, "update_plan_step", plan_id="plan-001", step=0, status="completed")
    assert code(bad) == "step_out_of_range"

    await call(session, "markdown_plan", title="Second", steps=[{"description": "only"}])
    await session.write_file(f"{PLANS}/notes.md", "not a plan")
    listed = await call(session, "list_plans")
    assert [p["id"] for p in listed.data["plans"]] == ["plan-001", "plan-002"]
    first = listed.data["plans"][0]
    assert first["title"] == "Refactor authentication module" and first["status"] == "active"
    assert first["steps"] == 3 and first["progress"]["completed"] == 1
    assert "1/3 completed (1 completed, 1 in progress, 1 pending)" in listed.text
    assert listed.data["plans"][1]["status"] == "draft"

    read = await call(session, "read_plan", plan_id="plan-001")
    assert read.ok and read.text == text
    missing = await call(session, "read_plan", plan_id="plan-009")
    assert not missing.ok and code(missing) == "plan_not_found" and "list_plans" in missing.text
    evil = await call(session, "read_plan", plan_id="../../etc/passwd")
    assert code(evil) == "invalid_plan_id"


async def test_overwrite_by_id_keeps_created(session: Session) -> None:
    r = await call(session, "markdown_plan", title="v1", steps=[{"description": "a"}])
    created = r.data["created"]
    r = await call(session, "markdown_plan", plan_id=r.data["id"], title="v2", steps=[{"description": "b"}],
                   status="completed")
    assert r.ok and r.data["title"] == "v2" and r.data["created"] == created and r.data["status"] == "completed"
    missing = await call(session, "markdown_plan", plan_id="plan-077", title="x", steps=[{"description": "a"}])
    assert code(missing) == "plan_not_found"
    with pytest.raises(ValueError):
        REGISTRY["markdown_plan"].input_model.model_validate({"title": "x", "steps": []})


async def test_step_update_keeps_hand_edits(session: Session) -> None:
    await call(session, "markdown_plan", title="T", steps=[{"description": "one"}, {"description": "two"}])
    path = f"{PLANS}/plan-001.md"
    text = (await session.read_file(path)).decode() + "\nSome hand-written remark.\n"
    await session.write_file(path, text)
    await call(session, "update_plan_step", plan_id="plan-001", step=2, status="completed")
    after = (await session.read_file(path)).decode()
    assert "2. [x] two" in after and "Some hand-written remark." in after


async def test_concurrent_creates_get_distinct_ids(session: Session) -> None:
    ids: list[str] = []

    async def create(i: int) -> None:
        r = await call(session, "markdown_plan", title=f"plan {i}", steps=[{"description": "x"}])
        assert r.ok, r.text
        ids.append(r.data["id"])

    async with anyio.create_task_group() as tg:
        for i in range(12):
            tg.start_soon(create, i)
    assert sorted(ids) == [f"plan-{n:03d}" for n in range(1, 13)]


async def test_concurrent_step_updates_are_not_lost(session: Session) -> None:
    steps = [{"description": f"step {i}"} for i in range(1, 11)]
    await call(session, "markdown_plan", title="many", steps=steps)

    async def complete(step: int) -> None:
        r = await call(session, "update_plan_step", plan_id="plan-001", step=step, status="completed")
        assert r.ok, r.text

    async with anyio.create_task_group() as tg:
        for i in range(1, 11):
            tg.start_soon(complete, i)
    listed = await call(session, "list_plans")
    assert listed.data["plans"][0]["progress"]["completed"] == 10


async def test_a_write_from_elsewhere_is_never_overwritten(session: Session) -> None:
    """Compare-and-swap: a change made between the read and the write is re-read, not lost."""
    await call(session, "markdown_plan", title="cas", steps=[{"description": "a"}, {"description": "b"}])
    ctx = session.tool_context()
    store = PlanStore(ctx)
    path = store.path("plan-001")
    attempts = 0

    def change(plan: Plan, text: str) -> str:
        nonlocal attempts
        attempts += 1
        return set_step_mark(text, 2, "completed")

    original = ctx.client.write_file
    interfered = False

    async def racing_write(target: str, data: bytes | str, **kw: Any) -> Any:
        nonlocal interfered
        if not interfered:
            interfered = True  # another writer gets in first
            current = (await session.read_file(path)).decode()
            await original(path, set_step_mark(current, 1, "skipped"))
        return await original(target, data, **kw)

    ctx.client.write_file = racing_write  # type: ignore[method-assign]
    plan = await store.modify("plan-001", change)
    assert attempts == 2
    assert [s.status for s in plan.steps] == ["skipped", "completed"]


async def test_plans_directory_is_configurable(session: Session) -> None:
    configure_plans(session, "docs/plans")
    r = await call(session, "markdown_plan", title="here", steps=[{"description": "x"}])
    assert r.data["path"] == "/workspace/docs/plans/plan-001.md"
    assert (await session.stat("/workspace/docs/plans/plan-001.md")).exists


def test_render_and_parse_round_trip() -> None:
    plan = Plan("plan-003", "Title  with\nnewline", "active", "2024-01-01T00:00:00Z",
                [Step("first", "line one\nline two", "in_progress"), Step("second", "", "skipped")])
    parsed = parse_plan(render_plan(plan), "plan-003")
    assert parsed.title == "Title with newline" and parsed.status == "active"
    assert [(s.description, s.notes, s.status) for s in parsed.steps] == [
        ("first", "line one\nline two", "in_progress"), ("second", "", "skipped"),
    ]
