"""The provider's lifecycle beyond the self-check, through Inspect's own command line: an
`inspect eval --no-sandbox-cleanup` (configured from a YAML file) leaves its sample's
container running, lists it, and `inspect sandbox cleanup caisson ID` removes it by the id it
showed. Cleanup never removes a sandbox whose owner still runs (unless forced), nor another
user's leftovers, and refuses ids it does not know."""

from __future__ import annotations

import os
import re
import sys
import textwrap
from pathlib import Path

import anyio
import pytest

from caisson import Runtime
from caisson.backend import SandboxRow
from caisson.integrations import inspect as provider
from caisson.integrations.inspect import FORCE_ENV, TENANT, CaissonSandboxConfig, CaissonSandboxEnvironment
from caisson.integrations.leftovers import CleanupRefused, select

pytestmark = pytest.mark.anyio

INSPECT = str(Path(sys.executable).with_name("inspect"))

TASK = """
from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.solver import solver
from inspect_ai.util import sandbox


@solver
def leave_a_note():
    async def solve(state, generate):
        await sandbox().write_file("note.txt", "left for a person to look at\\n")
        return state
    return solve


@task
def keep():
    return Task(dataset=[Sample(input="look at me")], solver=leave_a_note())
"""


async def inspect_cli(*args: str, cwd: Path | None = None, force: bool = False) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if k != FORCE_ENV}
    if force:
        env[FORCE_ENV] = "1"
    done = await anyio.run_process([INSPECT, *args], cwd=cwd, env=env, check=False)
    return done.returncode, done.stdout.decode() + done.stderr.decode()


async def ids_on_engine(rt: Runtime) -> set[str]:
    return {row.id for row in await rt.backend.list_sandboxes()}


async def test_eval_leftover_is_listed_and_removed_by_the_container_id_it_showed(rt: Runtime, tmp_path: Path) -> None:
    (tmp_path / "task.py").write_text(TASK)
    (tmp_path / "sandbox.yaml").write_text("pool: 0\nttl: 900\nlimits:\n  memory: 1g\n")
    code, out = await inspect_cli(
        "eval", "task.py", "--model", "mockllm/model", "--sandbox", "caisson:sandbox.yaml",
        "--no-sandbox-cleanup", "--log-dir", str(tmp_path / "logs"), "--display", "plain", cwd=tmp_path,
    )
    assert code == 0, out
    listed = re.search(r"(s-[0-9a-f]{12})\W+([0-9a-f]{12})", out)
    assert listed is not None, f"the leftover is not listed:\n{out}"
    session_id, short = listed.groups()
    assert "inspect sandbox cleanup caisson" in out
    [container] = [c for c in await ids_on_engine(rt) if c.startswith(short)]
    try:
        await look_inside(rt, session_id)
    except BaseException:
        await rt.backend.remove(container)
        raise
    code, out = await inspect_cli("sandbox", "cleanup", "caisson", short)
    assert code == 0, out
    assert "removed" in out and short in out
    assert container not in await ids_on_engine(rt)

    code, out = await inspect_cli("sandbox", "cleanup", "caisson", short)
    assert code != 0 and f"no sandbox '{short}'" in out, out


async def look_inside(rt: Runtime, session_id: str) -> None:
    """It is usable: what the sample wrote is there, and the YAML's limits were applied."""
    again = await rt.reattach(session_id, tenant=TENANT)
    try:
        assert await again.read_file("/workspace/note.txt") == b"left for a person to look at\n"
        memory = await again.exec("cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes")
        assert memory.stdout.strip() == str(1024**3), memory
    finally:
        await again.detach()


async def test_a_live_owners_sandbox_stays_whatever_id_names_it_unless_forced(rt: Runtime) -> None:
    async with rt.session(tenant=TENANT) as s:
        names = [s.id, s.container_id, s.container_id[:12], s.container_id[:4]]
        tried = landed = 0
        for name in names:
            code, out = await inspect_cli("sandbox", "cleanup", "caisson", name)
            tried += 1
            alive = s.container_id in await ids_on_engine(rt)
            landed += not alive
            # (Four characters may also match another sandbox: refused as ambiguous then.)
            assert code != 0 and ("still running" in out or "matches" in out), out
        code, out = await inspect_cli("sandbox", "cleanup", "caisson")  # every leftover of Inspect
        tried += 1
        landed += s.container_id not in await ids_on_engine(rt)
        assert code == 0 and "kept" in out and s.container_id[:12] in out, out
        print(f"tried {tried}, landed {landed}")
        assert landed == 0
        assert (await s.exec(["true"])).exit_code == 0

        code, out = await inspect_cli("sandbox", "cleanup", "caisson", s.container_id[:12], force=True)
        assert code == 0 and "removed" in out, out
        assert s.container_id not in await ids_on_engine(rt)


async def test_the_no_argument_form_leaves_other_users_sandboxes_alone(rt: Runtime, tmp_path: Path) -> None:
    """A sandbox of another caisson user (not Inspect's) whose owner is gone: a detached
    session of a process that exited."""
    script = textwrap.dedent("""
        import anyio
        from caisson import Runtime

        async def main():
            async with Runtime() as rt:
                s = await rt.open_session()
                print(s.id, s.container_id)
                await s.detach(keep_for=600)

        anyio.run(main)
    """)
    done = await anyio.run_process([sys.executable, "-c", script], cwd=tmp_path)
    session_id, container = done.stdout.decode().split()
    try:
        code, out = await inspect_cli("sandbox", "cleanup", "caisson")
        assert code == 0, out
        assert container in await ids_on_engine(rt) and container[:12] not in out
    finally:
        # Named explicitly, it goes: its owner is gone.
        code, out = await inspect_cli("sandbox", "cleanup", "caisson", session_id)
    assert code == 0 and "removed" in out, out
    assert container not in await ids_on_engine(rt)


async def test_samples_containers_are_gone_when_the_task_ends(rt: Runtime) -> None:
    """sample_cleanup frees the sample's slot at once and removes its container after; by the
    end of task_cleanup every one is gone."""
    await CaissonSandboxEnvironment.task_init("gone", None)
    samples = [await CaissonSandboxEnvironment.sample_init("gone", None, {}) for _ in range(3)]
    containers = {envs["default"].as_type(CaissonSandboxEnvironment).session.container_id for envs in samples}
    for envs in samples:
        await CaissonSandboxEnvironment.sample_cleanup("gone", None, envs, False)
    await CaissonSandboxEnvironment.task_cleanup("gone", None, True)
    assert len(containers) == 3 and not containers & await ids_on_engine(rt)


def test_ids_that_name_nothing_or_too_much_are_refused() -> None:
    rows = [SandboxRow(id="abcd" + "0" * 60, session_id="s-1"), SandboxRow(id="abce" + "1" * 60, session_id="s-2")]
    assert select(rows, "s-2") is rows[1]
    assert select(rows, "abcd") is rows[0]
    for ident in ("abc", "a", "", "s-", "s-3", "0000", "ABCD"):
        with pytest.raises(CleanupRefused, match="no sandbox"):
            select(rows, ident)
    rows.append(SandboxRow(id="abcd" + "2" * 60, session_id="s-3"))
    with pytest.raises(CleanupRefused, match="matches 2 sandboxes"):
        select(rows, "abcd")


async def test_with_a_pool_the_first_samples_start_on_warm_containers_and_none_is_left(rt: Runtime) -> None:
    """task_init waits for the warm pool to fill, so the first wave of samples takes started
    containers (the pooled session ids); closing waits for the refill, yet by the end of
    task_cleanup neither the samples' containers nor the pool's are left."""
    config = CaissonSandboxConfig(pool=2)
    await CaissonSandboxEnvironment.task_init("warm", config)
    runtime = provider._Shared.runtime
    assert runtime is not None
    warm = runtime.backend.pool_session_ids()
    assert len(warm) == 2, "task_init returned before the pool was full"
    samples = [await CaissonSandboxEnvironment.sample_init("warm", config, {}) for _ in range(2)]
    sessions = [envs["default"].as_type(CaissonSandboxEnvironment).session for envs in samples]
    assert {s.id for s in sessions} == warm
    for envs in samples:
        await CaissonSandboxEnvironment.sample_cleanup("warm", config, envs, False)
    assert await runtime.pool_ready(180), "the pool did not refill after its containers were taken"
    refilled = set(runtime.backend.pool_session_ids())
    await CaissonSandboxEnvironment.task_cleanup("warm", config, True)
    left = {row.session_id for row in await rt.backend.list_sandboxes()}
    print(f"samples' sessions left: {len({s.id for s in sessions} & left)}, pool's left: {len(refilled & left)}")
    assert not ({s.id for s in sessions} | refilled) & left
