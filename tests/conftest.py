"""Shared fixtures. Integration tests use the real Docker engine: when it is missing
they fail (the Runtime raises DockerUnavailable); they never skip."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest

from caisson import Runtime, Session
from caisson.config import RuntimeConfig
from caisson.docker.images import build_image


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
async def rt(anyio_backend: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Runtime]:
    state = tmp_path_factory.mktemp("caisson-state")
    async with Runtime(RuntimeConfig(state_dir=str(state))) as runtime:
        # Same as the test command's set-up; here too so a changed daemon is never tested stale.
        await anyio.to_thread.run_sync(build_image, runtime.client)
        yield runtime


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
