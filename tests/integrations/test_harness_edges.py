"""Smaller edges an eval harness hits: copy_in of a tar as a binary file object (locally and
through caisson serve), and ``Runtime(pool=4)``."""

from __future__ import annotations

import io
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
from pydantic import ValidationError

from caisson import PoolConfig, RemoteRuntime, Runtime, RuntimeConfig, Session, SessionLike
from caisson.docker.images import build_image
from caisson.errors import DockerUnavailable
from caisson.server.settings import ServeSettings
from tests.server.harness import Api, ServerThread, tar_of

pytestmark = pytest.mark.anyio

FILES = {"repo/a.py": b"print('a')\n", "repo/pkg/b.bin": bytes(range(256)) * 8192}  # 2 MB: several pieces


async def copies_file_objects(s: SessionLike, tmp_path: Path) -> None:
    tar = tar_of(FILES)
    (tmp_path / "in.tar").write_bytes(tar)
    with open(tmp_path / "in.tar", "rb") as f:
        await s.copy_in(f, "/workspace/from-file")
    await s.copy_in(io.BytesIO(tar), "/workspace/from-bytesio")
    for dest in ("from-file", "from-bytesio"):
        for name, data in FILES.items():
            assert await s.read_file(f"/workspace/{dest}/{name}") == data
    (tmp_path / "note.txt").write_text("a file opened without 'rb'\n")
    with open(tmp_path / "note.txt") as text, pytest.raises(TypeError, match="binary file object"):
        await s.copy_in(text, "/workspace/from-text")  # type: ignore[arg-type]


async def test_copy_in_takes_a_binary_file_object(session: Session, tmp_path: Path) -> None:
    await copies_file_objects(session, tmp_path)


@pytest.fixture(scope="module")
async def served(rt: Runtime, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Api]:
    image = await anyio.to_thread.run_sync(build_image, rt.backend.client)  # type: ignore[attr-defined]
    settings = ServeSettings(port=0, state_dir=str(tmp_path_factory.mktemp("serve")), image=image)  # type: ignore[call-arg]
    server = await anyio.to_thread.run_sync(ServerThread(settings).start)
    assert server.hosted.admin_token
    try:
        yield Api(server.url, server.hosted.admin_token, "sqlite", server)
    finally:
        await anyio.to_thread.run_sync(server.stop)


async def test_remote_copy_in_takes_a_binary_file_object(served: Api, tmp_path: Path) -> None:
    t = await anyio.to_thread.run_sync(served.tenant, "copy-in-file")
    async with RemoteRuntime(served.url, t.token) as remote, remote.session() as s:
        await copies_file_objects(s, tmp_path)


async def test_runtime_pool_given_as_a_size(rt: Runtime, tmp_path: Path) -> None:
    assert RuntimeConfig(pool=3).pool == PoolConfig(size=3)
    assert RuntimeConfig(pool=0).pool is None
    with pytest.raises(ValidationError):
        Runtime(pool=-1)
    with pytest.raises(ValidationError):
        Runtime(pol=2)  # a misspelt setting is refused, not ignored
    engine = rt
    async with Runtime(pool=2, state_dir=str(tmp_path)) as rt:
        assert rt.config.pool == PoolConfig(size=2)
        assert await rt.pool_ready(timeout=180)
        async with rt.session() as s:
            assert (await s.exec(["whoami"])).stdout == "agent\n"
        assert await rt.pool_ready(timeout=180)
        idle = rt.backend.pool_session_ids()
    # Leaving the runtime removes the pool's idle containers (at once, on the fill threads).
    assert len(idle) == 2 and not idle & {row.session_id for row in await engine.backend.list_sandboxes()}


async def test_an_unreachable_engine_says_what_to_do_with_or_without_a_checkout(tmp_path: Path) -> None:
    with pytest.raises(DockerUnavailable) as caught:
        async with Runtime(docker_host="unix:///nonexistent/docker.sock", state_dir=str(tmp_path)):
            pass
    said = str(caught.value)
    assert "apt-get install docker.io" in said and "DOCKER_HOST" in said  # a wheel user's way
    assert "in a checkout of caisson, `scripts/setup.sh`" in said  # a contributor's
    doctor = await anyio.run_process(
        [str(Path(sys.executable).with_name("caisson")), "doctor"], check=False,
        env={**os.environ, "DOCKER_HOST": "unix:///nonexistent/docker.sock"},
    )
    out = doctor.stdout.decode() + doctor.stderr.decode()
    assert doctor.returncode != 0 and "start a Docker engine" in out and "from a checkout" in out, out
