"""Fixtures: a fresh daemon per test, checked for leaked processes when it exits.

The client lives in ``daemon_client`` (not here) so that test modules can import it
without depending on which ``conftest`` module Python finds first.
"""

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from daemon_client import Client, marked_pids, start_container_daemon, start_daemon, wait_for


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Client]:
    client = start_daemon(tmp_path)
    try:
        client.call("ping")  # up, and the workspace exists
        yield client
    finally:
        code = client.close()
        leftovers = wait_for(lambda: not marked_pids(client.mark), timeout=5.0)
        survivors = marked_pids(client.mark)
        for pid in survivors:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        assert code == 0, f"daemon exited with {code}; stderr:\n{client.stderr()}"
        assert leftovers, f"processes outlived the daemon: {survivors}"


@pytest.fixture
def ws(daemon: Client) -> Path:
    return daemon.workspace


@pytest.fixture(scope="module", params=["clone-exec", "python-clones"])
def box(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    """A daemon in a hardened container of the sandbox image (agent user ``agent``, uid 1000),
    shared by the tests of one module: once with clone-exec, once with its clones in Python."""
    native = request.param == "clone-exec"
    client = start_container_daemon(tmp_path_factory.mktemp("box"), clone_exec=native)
    try:
        info = client.result(client.send("ping"), timeout=120)[0]
        assert info["clone_exec"] is native
        yield client
    finally:
        assert client.close() == 0, client.stderr()
