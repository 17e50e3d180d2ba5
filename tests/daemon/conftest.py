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
from daemon_client import Client, marked_pids, start_daemon, wait_for


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
