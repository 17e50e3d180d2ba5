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
                rt.client.api.put_archive, s.container_id, f"/tmp/raw{i}", tar))
            await _timed(engine_out, lambda i=i: anyio.to_thread.run_sync(
                lambda: b"".join(rt.client.api.get_archive(s.container_id, f"/tmp/raw{i}/repo")[0])))
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
    started = time.perf_counter()
    forks = await s.fork(4)
    result["fork_4_seconds"] = round(time.perf_counter() - started, 2)
    for fork in forks:
        await fork.close()
    return result
