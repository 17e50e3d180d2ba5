"""Shared fixtures. Integration tests use the real Docker engine: when it is missing
they fail (the Runtime raises DockerUnavailable); they never skip."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import docker.errors
import pytest

from caisson import Runtime, Session
from caisson.config import RuntimeConfig
from caisson.docker.containers import LABEL_OWNER
from caisson.docker.images import build_image


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """A failure's report as it happens, not only at the end: a run cut short (CI's time limit)
    still shows why its tests failed."""
    if report.failed:
        print(f"\n---- {report.nodeid} failed ({report.when}) ----\n{report.longreprtext}\n", flush=True)


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
async def rt(anyio_backend: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Runtime]:
    state = tmp_path_factory.mktemp("caisson-state")
    async with Runtime(RuntimeConfig(state_dir=str(state))) as runtime:
        # Same as the test command's set-up; here too so a changed daemon is never tested stale.
        await anyio.to_thread.run_sync(build_image, runtime.backend.client)  # type: ignore[attr-defined]
        yield runtime


@pytest.fixture(scope="module", autouse=True)
async def no_containers_left_over(rt: Runtime, request: pytest.FixtureRequest) -> None:
    """Before a module, this process's containers that no open session holds are ones an earlier
    test left running: they are named and removed, so one failure does not slow the rest."""

    def sweep() -> list[str]:
        held = {s.container_id for s in list(rt._sessions.values())}
        client = rt.backend.client  # type: ignore[attr-defined]
        rows = client.api.containers(filters={"label": f"{LABEL_OWNER}={rt.config.owner}"})
        left = [row for row in rows if row["Id"] not in held]
        for row in left:
            try:
                client.api.remove_container(row["Id"], force=True)
            except docker.errors.NotFound:
                pass  # gone between the listing and the removal
            except docker.errors.APIError as e:
                # A session that ended itself (its TTL) is removed by the engine (auto_remove);
                # on a loaded disk that removal may still be under way.
                if e.status_code != 409:
                    raise
        return [f"{row['Id'][:12]} ({row['Status']})" for row in left]

    if left := await anyio.to_thread.run_sync(sweep):
        LEFT_OVER.append(f"before {request.node.nodeid}: {', '.join(left)}")


# What the sweep above removed, said in the run's summary (a fixture's print is captured).
LEFT_OVER: list[str] = []


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if LEFT_OVER:
        terminalreporter.section("containers earlier tests left running (removed)")
        for line in LEFT_OVER:
            terminalreporter.line(line)


@pytest.fixture
async def session(rt: Runtime) -> AsyncIterator[Session]:
    """A fresh session per test."""
    async with rt.session() as s:
        yield s


@pytest.fixture(scope="module")
async def shared_session(rt: Runtime) -> AsyncIterator[Session]:
    """One session for a whole module, for tests that do not disturb each other."""
    async with rt.session() as s:
        yield s
