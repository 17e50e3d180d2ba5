"""What a harness may rely on from a session, local (``Session``) or hosted (``RemoteSession``).

A structural type: both classes satisfy it (mypy checks that in ``caisson/__init__.py``), and
one conformance test module runs the same calls against both (tests/conformance/test_session.py).
Code written against ``SessionLike`` runs on either.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Sequence
from typing import Any, Protocol

from caisson.client.archive import CopySource
from caisson.client.models import ExecResult, SpawnResult, StreamEvent, TaskInfo, TaskOutput, WriteResult
from caisson.tools.base import ToolResult


class SessionLike(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def closed(self) -> bool: ...

    async def exec(
        self,
        command: str | list[str],
        *,
        timeout: float | None = 60.0,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
    ) -> ExecResult: ...

    def exec_stream(
        self,
        command: str | list[str],
        *,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout: float | None = None,
    ) -> AsyncIterator[StreamEvent]: ...

    async def read_file(self, path: str, offset: int = 0, length: int = -1) -> bytes: ...

    async def write_file(
        self, path: str, data: bytes | str, *, expected_sha256: str | None = None, mode: int | None = None
    ) -> WriteResult: ...

    async def spawn(
        self,
        command: str | list[str],
        *,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout: float | None = None,
        name: str | None = None,
    ) -> SpawnResult: ...

    async def task_read(
        self, task_id: str, *, stdout_offset: int = 0, stderr_offset: int = 0, wait: float = 0.0
    ) -> TaskOutput: ...

    async def task_signal(self, task_id: str, signal: str = "KILL") -> None: ...

    async def task_list(self) -> list[TaskInfo]: ...

    async def call(self, tool: str, args: dict[str, Any] | None = None) -> ToolResult: ...

    def tools(self, format: str = "json_schema") -> list[dict[str, Any]]: ...

    async def copy_in(self, source: CopySource, dest: str) -> None: ...

    def copy_out(self, path: str) -> AsyncIterator[bytes]: ...

    async def copy_out_to(self, path: str, host_dir: str | os.PathLike[str]) -> list[str]: ...

    async def snapshot(self) -> str: ...

    async def fork(self, n: int) -> Sequence[SessionLike]: ...

    async def close(self) -> None: ...
