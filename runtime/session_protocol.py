"""What a harness may rely on from a session, local (``Session``) or hosted (``RemoteSession``).

A structural type: both classes satisfy it (mypy checks that in ``caisson/__init__.py``), and
one conformance test module runs the same calls against both (tests/conformance/test_session.py).
Code written against ``SessionLike`` runs on either.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Sequence
from typing import Any, Literal, Protocol

from caisson.client.archive import CopySource
from caisson.client.models import (
    DaemonInfo,
    DirEntry,
    ExecResult,
    FindResult,
    GrepResult,
    ReadResult,
    SpawnResult,
    StatResult,
    StreamEvent,
    TaskInfo,
    TaskOutput,
    WalkResult,
    WriteResult,
)
from caisson.tools.base import ToolResult
from caisson.workspace_diff import WorkspaceDiff


class SessionLike(Protocol):
    """Every primitive, tool call, task, stream, copy, snapshot, fork and diff of a session.
    What a hosted session leaves out: the root-only options of the library's primitives (``user``,
    ``owner``, ``plain``, ``max_size``...) and ``include_secrets``: a tenant never gets them."""

    @property
    def id(self) -> str: ...

    @property
    def closed(self) -> bool: ...

    async def ping(self, *, timeout: float | None = None) -> DaemonInfo: ...

    # ---- commands -----------------------------------------------------------------------

    async def exec(
        self,
        command: str | list[str],
        *,
        timeout: float | None = 60.0,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        stdin: str | None = None,
    ) -> ExecResult: ...

    def exec_stream(
        self,
        command: str | list[str],
        *,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout: float | None = None,
    ) -> AsyncIterator[StreamEvent]: ...

    # ---- files --------------------------------------------------------------------------

    async def stat(self, path: str, *, follow: bool = True) -> StatResult: ...

    async def read_range(self, path: str, offset: int = 0, length: int = -1, *, hash: bool = False) -> ReadResult: ...

    async def read_file(self, path: str, offset: int = 0, length: int = -1) -> bytes: ...

    async def write_file(
        self, path: str, data: bytes | str, *, expected_sha256: str | None = None, mode: int | None = None
    ) -> WriteResult: ...

    async def list_dir(self, path: str) -> list[DirEntry]: ...

    async def walk(
        self,
        path: str,
        *,
        include_hidden: bool = False,
        max_entries: int = 200_000,
        ignore_files: tuple[str, ...] = (".gitignore",),
        detail: bool = False,
    ) -> WalkResult: ...

    async def grep(
        self,
        root: str,
        pattern: str,
        *,
        paths: Sequence[str] | None = None,
        engine: Literal["auto", "rg", "python"] = "auto",
        mode: Literal["content", "files", "count"] = "content",
        fixed_strings: bool = False,
        ignore_case: bool = False,
        multiline: bool = False,
        globs: Sequence[str] = (),
        type_globs: Sequence[str] = (),
        hidden: bool = False,
        no_ignore: bool = False,
        max_total: int = 1000,
        max_per_file: int | None = None,
        max_line_chars: int = 2000,
        before: int = 0,
        after: int = 0,
        timeout: float | None = None,
    ) -> GrepResult: ...

    async def find(
        self,
        root: str,
        regex: str,
        *,
        globs: Sequence[str] = (),
        type_globs: Sequence[str] = (),
        hidden: bool = False,
        no_ignore: bool = False,
        sort: Literal["modified", "path"] = "modified",
        offset: int = 0,
        limit: int = 1000,
        timeout: float | None = None,
    ) -> FindResult: ...

    async def mkdir(self, path: str, *, parents: bool = True, exist_ok: bool = True) -> bool: ...

    async def remove(self, path: str, *, recursive: bool = False, missing_ok: bool = False) -> bool: ...

    async def rename(self, src: str, dst: str, *, overwrite: bool = True) -> None: ...

    # ---- background tasks ---------------------------------------------------------------

    async def spawn(
        self,
        command: str | list[str],
        *,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout: float | None = None,
        name: str | None = None,
        stdin: str | None = None,
    ) -> SpawnResult: ...

    async def task_read(
        self,
        task_id: str,
        *,
        stdout_offset: int = 0,
        stderr_offset: int = 0,
        max_bytes: int = 1024 * 1024,
        wait: float = 0.0,
    ) -> TaskOutput: ...

    async def task_write(self, task_id: str, data: bytes | str, *, close: bool = False) -> int: ...

    async def task_signal(self, task_id: str, signal: str | int = "KILL", *, tree: bool = True) -> None: ...

    async def task_wait(self, task_id: str, timeout: float | None = None) -> TaskOutput: ...

    async def task_list(self) -> list[TaskInfo]: ...

    # ---- tool calls ---------------------------------------------------------------------

    async def call(self, tool: str, args: dict[str, Any] | None = None) -> ToolResult: ...

    def tools(self, format: str = "json_schema") -> list[dict[str, Any]]: ...

    # ---- bulk copy, engine-side work, lifecycle -----------------------------------------

    async def copy_in(self, source: CopySource, dest: str) -> None: ...

    def copy_out(self, path: str) -> AsyncIterator[bytes]: ...

    async def copy_out_to(self, path: str, host_dir: str | os.PathLike[str]) -> list[str]: ...

    async def diff(self, path: str | None = None) -> WorkspaceDiff: ...

    async def snapshot(self) -> str: ...

    async def fork(self, n: int) -> Sequence[SessionLike]: ...

    async def close(self) -> None: ...
