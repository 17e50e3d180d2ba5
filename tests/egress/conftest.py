"""Fixtures of the egress tests: the loopback servers, a runtime whose ``egress_hosts`` maps
the test names to them, and sessions that have curl, pip and the test CA."""

from __future__ import annotations

import importlib.util
import io
import shutil
import subprocess
import tarfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from caisson import Runtime, Session
from caisson.config import RuntimeConfig
from caisson.docker.images import build_image
from caisson.policy import ApprovalAnswer, ApprovalRequest

from .servers import NAMES, Origin, Sink

TOOLS = "/workspace/.tools"


@pytest.fixture(scope="module")
def origin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Origin]:
    servers = Origin(tmp_path_factory.mktemp("origin"))
    yield servers
    servers.close()


@pytest.fixture(scope="module")
def sink() -> Iterator[Sink]:
    target = Sink()
    yield target
    target.close()


@pytest.fixture(scope="module")
async def ert(anyio_backend: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Runtime]:
    """A runtime that maps the test names to the host's loopback (and nothing else)."""
    state = tmp_path_factory.mktemp("egress-state")
    config = RuntimeConfig(state_dir=str(state), egress_hosts=dict.fromkeys(NAMES, "127.0.0.1"))
    async with Runtime(config) as runtime:
        await anyio.to_thread.run_sync(build_image, runtime.backend.client)  # type: ignore[attr-defined]
        yield runtime


def _tools_tar(ca_pem: bytes) -> bytes:
    """curl (with the libcurl it links, from this host: the image has neither), pip's
    package from this interpreter, and the test CA."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        curl = shutil.which("curl")
        assert curl, "the egress tests need curl on the host, to copy it into the session"
        tar.add(curl, ".tools/curl")
        for line in subprocess.run(["ldd", curl], capture_output=True, text=True, check=True).stdout.splitlines():
            if "libcurl.so" in line:
                lib = line.split("=>")[1].split()[0]
                tar.add(str(Path(lib).resolve()), f".tools/{Path(lib).name}")
        spec = importlib.util.find_spec("pip")
        assert spec and spec.submodule_search_locations
        tar.add(list(spec.submodule_search_locations)[0], ".tools/py/pip")
        info = tarfile.TarInfo(".tools/ca.pem")
        info.size, info.mode = len(ca_pem), 0o644
        tar.addfile(info, io.BytesIO(ca_pem))
    return buf.getvalue()


TOOL_ENV = {
    "PATH": f"{TOOLS}:/usr/local/bin:/usr/bin:/bin",
    "LD_LIBRARY_PATH": TOOLS,
    "PYTHONPATH": f"{TOOLS}/py",
    "CURL_CA_BUNDLE": f"{TOOLS}/ca.pem",
    "GIT_SSL_CAINFO": f"{TOOLS}/ca.pem",
    "PIP_CERT": f"{TOOLS}/ca.pem",
    "SSL_CERT_FILE": f"{TOOLS}/ca.pem",
    "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    "PIP_NO_CACHE_DIR": "1",
    "HOME": "/home/agent",
}


class Approver:
    """Answers egress approvals as told (``answer``), everything else allow-once; counts asks."""

    def __init__(self, answer: str = "deny") -> None:
        self.answer = answer
        self.asked: list[ApprovalRequest] = []

    async def __call__(self, request: ApprovalRequest) -> ApprovalAnswer:
        if request.tool != "egress":
            return ApprovalAnswer.allow_once(approver="test")
        self.asked.append(request)
        if self.answer == "allow_once":
            return ApprovalAnswer.allow_once(approver="test")
        if self.answer == "allow_session":
            return ApprovalAnswer.allow_session(approver="test")
        return ApprovalAnswer.deny("denied by the test", approver="test")


async def open_tooled(rt: Runtime, origin: Origin, egress: list[str], approver: Approver, **overrides: Any) -> Session:
    session = await rt.open_session(egress=egress, env=TOOL_ENV, approval_handler=approver, **overrides)
    try:
        await session.copy_in(_tools_tar(origin.ca_pem), "/workspace")
    except BaseException:
        await session.close()
        raise
    return session


async def bash(session: Session, command: str, timeout: float = 120) -> tuple[int, str]:
    """Run ``command`` through the session's bash tool (policy, Landlock); exit code and output."""
    result = await session.call("bash", {"command": command, "timeout": timeout})
    assert result.ok and result.data is not None, result
    return int(result.data["exit_code"]), result.text
