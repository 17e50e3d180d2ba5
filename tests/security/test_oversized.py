"""Oversized and hostile inputs: each gets a clear error, host memory stays bounded, other
sessions' calls go on, and every call is audited exactly once."""

from __future__ import annotations

import resource
import time

import anyio
import pytest

from caisson import Runtime, Session

pytestmark = pytest.mark.anyio

BIG = 100 * 1024 * 1024


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def nested(depth: int) -> list[object]:
    root: list[object] = []
    node = root
    for _ in range(depth):
        child: list[object] = []
        node.append(child)
        node = child
    return root


CASES = {
    "bash: a 100 MB command": ("bash", lambda: {"command": "echo " + "a" * BIG}),
    "grep: a 100 MB pattern": ("grep", lambda: {"pattern": "a" * BIG, "path": "/workspace"}),
    "multi_edit: 100,000 edits": (
        "multi_edit",
        lambda: {"path": "/workspace/f.txt", "edits": [{"old_string": "a", "new_string": "b"}] * 100_000},
    ),
    "glob: a 1 MB pattern": ("glob", lambda: {"pattern": "*" * (1024 * 1024)}),
    # Under the caps, but as costly to analyse as they come: the answer is still quick and clear.
    "bash: a 200 KB line of substitutions": ("bash", lambda: {"command": "echo $(echo $(echo x)) " * 9_000}),
    "grep: a 60 KB catastrophic pattern": ("grep", lambda: {"pattern": "(a+)+$" * 10_000, "path": "/workspace"}),
    "write_file: arguments nested 200,000 deep": ("write_file", lambda: {"path": "/workspace/x", "content": nested(200_000)}),
}


async def test_oversized_inputs_are_refused_clearly(rt: Runtime) -> None:
    async with rt.session() as victim, rt.session() as bystander:
        await victim.write_file("/workspace/f.txt", "a\n")
        slowest = 0.0
        answered = 0
        done = anyio.Event()

        async def keep_calling(s: Session) -> None:
            nonlocal slowest, answered
            while not done.is_set():
                answered += 1
                started = time.perf_counter()
                r = await s.call("bash", {"command": "echo ok"})
                assert r.ok and r.text.strip() == "ok"
                slowest = max(slowest, time.perf_counter() - started)
                await anyio.sleep(0.01)

        before = rss_mb()
        outcomes: dict[str, str] = {}
        call_ids = []
        async with anyio.create_task_group() as tg:
            tg.start_soon(keep_calling, bystander)
            for name, (tool, make) in CASES.items():
                args = make()
                r = await victim.call(tool, args)
                del args
                call_ids.append(r.call_id)
                outcomes[name] = f"{r.error.code if r.error else 'ok'}: {r.text[:90]}"
            done.set()
        growth = rss_mb() - before
        for name, outcome in outcomes.items():
            print(f"{name} -> {outcome}")
        print(f"host peak RSS grew by {growth:.0f} MB; another session made {answered} calls meanwhile, "
              f"the slowest took {slowest * 1000:.0f} ms")
        assert all(
            o.startswith(("arguments_too_large", "invalid_arguments", "permission_denied"))
            for name, o in outcomes.items() if "catastrophic" not in name
        ), outcomes
        assert answered > 0
        # The inputs themselves are 100 MB; handling them may not multiply that.
        assert growth < 400
        # Another session's call is never held for the handling of these inputs. A bystander call
        # takes tens of ms on a quiet machine and up to ~2.3 s beside a full test run (seen in CI);
        # an input parsed or analysed where it blocks the controller would hold it for far longer.
        assert slowest < 10.0
        rt.audit.flush()
        events = rt.audit.query(session=victim.id)
        assert sorted(e.call_id for e in events) == sorted(call_ids)
