"""Servers for the API tests: one over SQLite and one over a real PostgreSQL (Debian's, in a
container started by testcontainers); ``api`` runs each test against both. Docker missing
fails these tests, never skips them."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest
from testcontainers.core.container import DockerContainer
from testcontainers.core.wait_strategies import LogMessageWaitStrategy

from caisson.docker.images import build_image
from caisson.server.settings import ServeSettings
from tests.server.harness import Api, ServerThread, postgres_image

# No reaper container: the fixture stops what it starts.
os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")


@pytest.fixture(scope="session")
def docker_engine() -> Iterator[docker.DockerClient]:
    client = docker.from_env()
    yield client
    client.close()


@pytest.fixture(scope="session")
def sandbox_image(docker_engine: docker.DockerClient) -> str:
    """Built once and pinned: the servers under test open every session from this tag."""
    return build_image(docker_engine)


@pytest.fixture(scope="session")
def postgres_url(docker_engine: docker.DockerClient) -> Iterator[str]:
    ready = LogMessageWaitStrategy("database system is ready to accept connections").with_startup_timeout(90)
    container = DockerContainer(postgres_image(docker_engine)).with_exposed_ports(5432).waiting_for(ready)
    container.start()
    try:
        yield f"postgresql://caisson@{container.get_container_host_ip()}:{container.get_exposed_port(5432)}/postgres"
    finally:
        container.stop()


def start_server(tmp: Path, image: str, db: str | None = None, **settings: object) -> ServerThread:
    return ServerThread(ServeSettings(port=0, state_dir=str(tmp), db=db, image=image, **settings)).start()  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def sqlite_api(sandbox_image: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    server = start_server(tmp_path_factory.mktemp("serve-sqlite"), sandbox_image, approval_timeout=60)
    assert server.hosted.admin_token
    yield Api(server.url, server.hosted.admin_token, "sqlite", server)
    server.stop()


@pytest.fixture(scope="session")
def postgres_api(postgres_url: str, sandbox_image: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    server = start_server(tmp_path_factory.mktemp("serve-postgres"), sandbox_image, db=postgres_url, approval_timeout=60)
    assert server.hosted.admin_token
    yield Api(server.url, server.hosted.admin_token, "postgres", server)
    server.stop()


@pytest.fixture(params=["sqlite", "postgres"])
def api(request: pytest.FixtureRequest) -> Api:
    """The same test against each store."""
    found: Api = request.getfixturevalue(f"{request.param}_api")
    return found
