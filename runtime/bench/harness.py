"""What an eval harness pays per episode beyond single calls: a repository in and out (200
files, 50 MB) beside the engine's own archive copy, snapshot, fork and diff."""

from __future__ import annotations

import io
import os
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from caisson.bench.baseline import docker_client
from caisson.bench.stats import summarize
from caisson.runtime import Runtime
from caisson.session import Session

FILES = 200
TOTAL = 50 * 1024 * 1024


def _make_tree(root: Path) -> None:
    size = TOTAL // FILES
    for i in range(FILES):
        sub = root / f"pkg{i % 10}"
        sub.mkdir(exist_ok=True)
        (sub / f"mod{i}.py").write_bytes(os.urandom(size))


def _tar_of(root: Path) -> bytes:
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w") as tar:
        tar.add(root, arcname="repo")
    return data.getvalue()


async def _timed(samples: list[float], work: Any) -> Any:
    started = time.perf_counter()
    out = await work()
    samples.append((time.perf_counter() - started) * 1000)
    return out


async def bench_harness(rt: Runtime, s: Session, iterations: int) -> dict[str, Any]:
    n = max(3, iterations // 50)
    result: dict[str, Any] = {"tree": {"files": FILES, "bytes": TOTAL}}
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "repo"
        tree.mkdir()
        _make_tree(tree)
        tar = _tar_of(tree)
        copy_in: list[float] = []
        copy_out: list[float] = []
        engine_in: list[float] = []
        engine_out: list[float] = []
        for i in range(n):
            await _timed(copy_in, lambda i=i: s.copy_in(tree, f"/workspace/in{i}"))
            await _timed(copy_out, lambda i=i: s.copy_out_to(f"/workspace/in{i}", Path(tmp) / f"out{i}"))
            await s.exec(["mkdir", "-p", f"/tmp/raw{i}"])
            # The baseline: the engine's archive endpoints (what `docker cp` uses), same tree.
            await _timed(engine_in, lambda i=i: anyio.to_thread.run_sync(
                docker_client(rt).api.put_archive, s.container_id, f"/tmp/raw{i}", tar))
            await _timed(engine_out, lambda i=i: anyio.to_thread.run_sync(
                lambda: b"".join(docker_client(rt).api.get_archive(s.container_id, f"/tmp/raw{i}/repo")[0])))
        result["copy_in_50mb"] = summarize(copy_in)
        result["copy_out_50mb"] = summarize(copy_out)
        result["engine_put_archive_50mb_baseline"] = summarize(engine_in)
        result["engine_get_archive_50mb_baseline"] = summarize(engine_out)

    snap: list[float] = []
    fork1: list[float] = []
    diffs: list[float] = []
    for _ in range(n):
        ref = await _timed(snap, s.snapshot)
        forks = await _timed(fork1, lambda: s.fork(1))
        try:
            await forks[0].exec("for f in /workspace/in0/pkg0/*.py; do echo edit >> $f; done")
            await _timed(diffs, lambda fork=forks[0]: fork.diff("/workspace/in0"))
        finally:
            await forks[0].close()
        del ref
    result["snapshot"] = summarize(snap)
    result["fork_1"] = summarize(fork1)
    result["diff_20_changed_of_200"] = summarize(diffs)
    # fork(8) opens its sessions at once; the target is a snapshot plus 1.5x one open.
    opens: list[float] = []
    for _ in range(n):
        opened = await _timed(opens, rt.open_session)
        await opened.close()
    started = time.perf_counter()
    forks = await s.fork(8)
    fork8 = (time.perf_counter() - started) * 1000
    for fork in forks:
        await fork.close()
    bound = summarize(snap)["p50_ms"] + 1.5 * summarize(opens)["p50_ms"]
    result["open_one"] = summarize(opens)
    result["fork_8"] = {"ms": round(fork8, 1), "target_ms": round(bound, 1), "met": fork8 <= bound}
    return result


# An Inspect eval as the issue measures it: 20 samples, max_sandboxes at once, without and
# with a warm pool of max_sandboxes. Each sample is three model turns (the mock model's latency
# stood in by a sleep) each running one command, as an agent's sample does in short.
EVAL_SAMPLES = 20
MAX_SANDBOXES = 4
MODEL_LATENCY = 1.0
TURNS = 3


def _inspect_eval(pool: int, log_dir: str) -> dict[str, Any]:
    """One eval on its own event loop (Inspect runs one per eval); sample_init timed per sample."""
    from inspect_ai import Task, eval
    from inspect_ai.dataset import Sample
    from inspect_ai.solver import Generate, TaskState, solver
    from inspect_ai.util import (
        SandboxEnvironment,
        SandboxEnvironmentConfigType,
        SandboxEnvironmentSpec,
        sandbox,
        sandboxenv,
    )

    from caisson.integrations.inspect import CaissonSandboxConfig, CaissonSandboxEnvironment

    inits: list[float] = []

    @sandboxenv(name="caisson-bench")
    class Timed(CaissonSandboxEnvironment):
        @classmethod
        async def sample_init(
            cls, task_name: str, config: SandboxEnvironmentConfigType | None, metadata: dict[str, str]
        ) -> dict[str, SandboxEnvironment]:
            started = time.perf_counter()
            envs = await super().sample_init(task_name, config, metadata)
            inits.append((time.perf_counter() - started) * 1000)
            return envs

    @solver
    def turns():  # type: ignore[no-untyped-def]
        async def solve(state: TaskState, generate: Generate) -> TaskState:
            for turn in range(TURNS):
                await anyio.sleep(MODEL_LATENCY)
                done = await sandbox().exec(["sh", "-c", f"echo {turn} >> /workspace/log && wc -l < /workspace/log"])
                if done.stdout.strip() != str(turn + 1):
                    raise AssertionError(done)
            return state

        return solve

    task = Task(
        dataset=[Sample(input=str(i)) for i in range(EVAL_SAMPLES)], solver=turns(),
        sandbox=SandboxEnvironmentSpec("caisson-bench", CaissonSandboxConfig(pool=pool)),
    )
    started = time.perf_counter()
    [log] = eval(task, model="mockllm/model", max_samples=MAX_SANDBOXES, max_sandboxes=MAX_SANDBOXES,
                 display="none", log_dir=log_dir)
    wall = time.perf_counter() - started
    return {"status": log.status, "wall_s": round(wall, 2), "sample_init": summarize(inits) if inits else None}


async def bench_inspect_eval() -> dict[str, Any]:
    try:
        import inspect_ai  # noqa: F401
    except ImportError:
        return {"skipped": "inspect_ai is not installed: pip install inspect_ai"}
    result: dict[str, Any] = {
        "samples": EVAL_SAMPLES, "max_sandboxes": MAX_SANDBOXES, "model_latency_s": MODEL_LATENCY, "turns": TURNS,
    }
    with tempfile.TemporaryDirectory() as logs:
        result["without_pool"] = await anyio.to_thread.run_sync(_inspect_eval, 0, logs)
        result["with_pool"] = await anyio.to_thread.run_sync(_inspect_eval, MAX_SANDBOXES, logs)
    pooled, plain = result["with_pool"], result["without_pool"]
    result["targets"] = {
        "sample_init_p95_ms_with_pool": 100,
        "p95_met": bool(pooled["sample_init"]) and pooled["sample_init"]["p95_ms"] <= 100,
        "wall_lower_with_pool": pooled["wall_s"] < plain["wall_s"],
    }
    return result
