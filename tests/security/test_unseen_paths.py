"""Files some tools read or write by a name of their own (plans, skills), which the policy
never sees: an agent plants links there to reach a secret or a guarded path. Such files are
read and written only when plain (no link on the way, a regular file's only name)."""

from __future__ import annotations

import uuid

import anyio
import pytest

from caisson import Runtime
from caisson.policy import ApprovalAnswer, ApprovalRequest

pytestmark = pytest.mark.anyio

TOKEN = f"tok-{uuid.uuid4().hex}"
PLANS = "/workspace/.agent-air/plans"
SKILLS = "/workspace/.agent-air/skills"


async def deny(request: ApprovalRequest) -> ApprovalAnswer:
    return ApprovalAnswer.deny("denied by the test")


async def test_plans_and_skills_never_follow_a_link_to_a_secret(rt: Runtime) -> None:
    async with rt.session(profile="agent-air", approval_handler=deny) as s:
        setup = (
            f"cd /workspace && printf -- '---\\nname: s\\ndescription: KEY={TOKEN}\\n---\\n' > .env && "
            f"mkdir -p {PLANS} {SKILLS}/a {SKILLS}/b && "
            f"ln -s /workspace/.env {PLANS}/plan-001.md && ln /workspace/.env {PLANS}/plan-002.md && "
            f"ln -s /workspace/.env {SKILLS}/a/SKILL.md && ln /workspace/.env {SKILLS}/b/SKILL.md"
        )
        assert (await s.exec(setup, user=s.config.agent_user)).exit_code == 0
        calls = [("read_plan", {"plan_id": "plan-001"}), ("read_plan", {"plan_id": "plan-002"}),
                 ("list_plans", {}), ("list_skills", {})]
        results = [await s.call(tool, args) for tool, args in calls]
        # A plan swapped between a real one and a link to the secret while it is read.
        real = "# Plan\n\n- [ ] one\n"
        await s.write_file(f"{PLANS}/plan-003.md", real)
        racer = await s.spawn(
            f"cd {PLANS} && while :; do ln -sfn /workspace/.env link && mv -fT link plan-003.md; "
            f"printf '{real}' > tmp && mv -fT tmp plan-003.md; done",
            user=s.config.agent_user,
        )
        reads = ok = 0
        with anyio.move_on_after(20):
            while reads < 300:
                r = await s.call("read_plan", {"plan_id": "plan-003"})
                reads += 1
                ok += r.ok
                results.append(r)
        await s.task_signal(racer.task_id, "KILL")
    leaked = sum(TOKEN in r.text for r in results)
    print(f"{len(calls)} reads of planted links and {reads} racing reads ({ok} of a real plan): {leaked} showed the secret")
    assert leaked == 0
    assert reads >= 100 and 0 < ok < reads  # the race ran both ways


async def test_a_plan_is_never_written_through_a_link(rt: Runtime) -> None:
    """The next plan's name planted as a link into a guarded directory: creating the plan
    fails and nothing lands there."""
    async with rt.session(profile="agent-air", approval_handler=deny) as s:
        setup = (
            "cd /workspace && git init -q && "
            f"mkdir -p {PLANS} && ln -s /workspace/.git/hooks/pre-commit {PLANS}/plan-001.md"
        )
        assert (await s.exec(setup, user=s.config.agent_user)).exit_code == 0
        r = await s.call("markdown_plan", {"title": "x", "steps": [{"description": "echo owned"}]})
        hook = await s.exec(["test", "-e", "/workspace/.git/hooks/pre-commit"])
    print(f"plan created through a link to a hook: {r.ok} ({r.text[:120]}); hook exists: {hook.exit_code == 0}")
    assert hook.exit_code != 0
    assert not r.ok and r.error is not None and r.error.code == "not_plain"


async def test_the_plans_directory_is_never_made_through_a_link(rt: Runtime) -> None:
    """The plans directory (or its parent) planted as a link into .git: making it for the
    first plan is refused, and nothing is made in .git."""
    plants = {
        "its parent": "ln -s /workspace/.git/hooks /workspace/.agent-air",
        "itself": f"mkdir -p /workspace/.agent-air && ln -s /workspace/.git/hooks {PLANS}",
        "itself, dangling": f"mkdir -p /workspace/.agent-air && ln -s /workspace/.git/hooks/plans {PLANS}",
        "its parent, relative": "ln -s .git/info /workspace/.agent-air",
    }
    made = 0
    answers: dict[str, str] = {}
    for what, plant in plants.items():
        async with rt.session(profile="agent-air", approval_handler=deny) as s:
            setup = f"cd /workspace && git init -q && find .git -type d | sort > /tmp/before && {plant}"
            assert (await s.exec(setup, user=s.config.agent_user)).exit_code == 0
            r = await s.call("markdown_plan", {"title": "x", "steps": [{"description": "step"}]})
            after = await s.exec("cd /workspace && find .git -type d | sort | diff /tmp/before - >/dev/null")
        made += after.exit_code != 0
        answers[what] = r.error.code if r.error is not None else "created"
    print(f"plans directory planted as a link into .git, {len(plants)} ways: {made} directories made there; {answers}")
    assert made == 0
    assert set(answers.values()) == {"not_plain"}

