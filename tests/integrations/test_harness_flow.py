"""An eval harness's SWE-bench-style flow: a repository in, a snapshot, 8 forks, each agent
commits its own edit (and stages, and branches), and each fork's ``diff(repo).patch()``
applies with ``git apply`` in a clean checkout of the base."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import anyio
import pytest

from caisson import Runtime

pytestmark = pytest.mark.anyio


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


async def test_fork_8_commit_and_apply_each_patch(rt: Runtime, tmp_path: Path) -> None:
    base = tmp_path / "base"
    base.mkdir()
    _git(base, "init", "-q")
    (base / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (base / "README").write_text("calc\n")
    _git(base, "add", "-A")
    _git(base, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    async with rt.session() as s:
        await s.copy_in(base, "/workspace/repo")
        started = time.monotonic()
        forks = await s.fork(8)
        took = time.monotonic() - started
        try:
            async def agent(i: int) -> str:
                fork = forks[i]
                r = await fork.exec(
                    f"git checkout -qb try{i} && sed -i 's/a - b/a + b + {i}/' calc.py && echo note{i} > NOTES{i}.md "
                    f"&& git add -A && git -c user.name=a -c user.email=a@a commit -qm 'fix {i}' && git gc -q",
                    cwd="/workspace/repo", timeout=120,
                )
                assert r.exit_code == 0, r.stderr
                diff = await fork.diff("/workspace/repo")
                assert not any(".git" in c.path.split("/") for c in diff.changes)
                assert {c.path for c in diff.changes} == {"calc.py", f"NOTES{i}.md"}
                return diff.patch()

            patches: list[str] = [""] * 8

            async def run(i: int) -> None:
                patches[i] = await agent(i)

            async with anyio.create_task_group() as tg:
                for i in range(8):
                    tg.start_soon(run, i)
        finally:
            for fork in forks:
                await fork.close()
    applied = 0
    for i, patch in enumerate(patches):
        clean = tmp_path / f"clean{i}"
        subprocess.run(["git", "clone", "-q", str(base), str(clean)], check=True)
        done = subprocess.run(["git", "-C", str(clean), "apply", "-"], input=patch, text=True, capture_output=True)
        assert done.returncode == 0, done.stderr
        assert f"a + b + {i}" in (clean / "calc.py").read_text() and (clean / f"NOTES{i}.md").read_text() == f"note{i}\n"
        applied += 1
    print(f"fork(8) took {took:.2f} s; patches applied with git apply: {applied} of 8")
    assert applied == 8
