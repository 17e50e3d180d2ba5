"""caisson as an Inspect AI sandbox: ``sandbox="caisson"`` or ``sandbox=("caisson", config)``.

Registered through the ``inspect_ai`` entry point, so installing caisson next to Inspect is
enough. The config is a ``CaissonSandboxConfig``, or a YAML or JSON file of its fields
(``--sandbox caisson:caisson.yaml``; a ``caisson.yaml`` beside the task is found by itself). One Runtime per process serves every task that uses the provider (with a warm pool
when the config asks for one); each sample gets its own session. Commands run as the
session's agent user unless ``user`` says otherwise, and file reads and writes are done with
that user's permissions, as a shell in the sandbox would.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
from pathlib import Path
from typing import Any, Literal, overload

import anyio
import sniffio
import yaml
from inspect_ai._util.error import PrerequisiteError
from inspect_ai.util import (
    ExecResult,
    OutputLimitExceededError,
    SandboxConnection,
    SandboxEnvironment,
    SandboxEnvironmentConfigType,
    SandboxEnvironmentLimits,
    sandboxenv,
)
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from rich import print as show
from rich.table import Table

from caisson.client.models import Confinement
from caisson.config import Limits, PoolConfig, RuntimeConfig, SessionConfig
from caisson.errors import ImageError, OpError
from caisson.integrations.leftovers import CleanupRefused, remove_leftovers, select
from caisson.logs import get_logger
from caisson.runtime import Runtime
from caisson.session import Session

log = get_logger("caisson.inspect")

# The tenant of every session the provider opens: `inspect sandbox cleanup caisson` without an
# id looks at these only, not at other users' sessions on the same engine.
TENANT = "inspect"
# `inspect sandbox cleanup caisson ID` has no flags of ours: this removes a live owner's sandbox.
FORCE_ENV = "CAISSON_CLEANUP_FORCE"
CONFIG_FILES = ("caisson.yaml", "caisson.yml", "caisson.json")
# How long a sample waits for the warm pool before it starts a container itself.
POOL_WAIT = 10.0
# How long task_init waits for the warm pool to fill: the first samples then start warm too.
POOL_FILL_WAIT = 120.0


class CaissonSandboxConfig(BaseModel):
    """What ``sandbox=("caisson", CaissonSandboxConfig(...))`` may set."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    image: str | None = Field(None, description="image to run (any with python3); default: caisson's own")
    profile: str = "caisson"
    limits: Limits = Field(default_factory=Limits)
    network: bool = False
    gvisor: bool = False
    workdir: str = "/workspace"
    user: str = Field("agent", description="the sandbox user: commands and file access run as it")
    ttl: float = Field(6 * 3600.0, gt=0)
    pool: int = Field(0, ge=0, description="warm containers kept ready for samples")

    def __hash__(self) -> int:  # Inspect keys its caches by config; Limits is not hashable itself
        return hash(self.model_dump_json())

    def session_config(self) -> SessionConfig:
        return SessionConfig(
            image=self.image,
            profile=self.profile,
            limits=self.limits,
            network=self.network,
            gvisor=self.gvisor,
            workdir=self.workdir,
            agent_user=self.user,
            ttl=self.ttl,
            tenant=TENANT,
            # A sample may sit idle while the model thinks for a long time.
            idle_timeout=None,
        )


class _Shared:
    """The process's Runtime, opened by the first task that needs it, closed by the last."""

    runtime: Runtime | None = None
    users = 0
    lock: anyio.Lock | None = None
    # Samples' sessions being closed after their sample ended, awaited before the Runtime closes.
    closing: set[asyncio.Task[None]] = set()


def _lock() -> anyio.Lock:
    if _Shared.lock is None:
        _Shared.lock = anyio.Lock()
    return _Shared.lock


class SandboxConfigError(PrerequisiteError, ValueError):
    """A config that cannot be read as a CaissonSandboxConfig; the message says why (Inspect
    shows a PrerequisiteError's message without a traceback)."""

    def __init__(self, message: str) -> None:
        PrerequisiteError.__init__(self, message)
        ValueError.__init__(self, message)


# Files read by task_init (run in the task's directory), by the name the task gave: a later
# sample_init may run elsewhere.
_files: dict[str, CaissonSandboxConfig] = {}


def load_config_file(path: str) -> CaissonSandboxConfig:
    """A YAML or JSON file of CaissonSandboxConfig fields, relative to the current directory."""
    hint = "a YAML or JSON mapping of CaissonSandboxConfig fields, e.g. `image: python:3.12` and `pool: 8`"
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise SandboxConfigError(f"caisson sandbox config {path}: {exc.strerror} (in {os.getcwd()}); give {hint}") from None
    try:
        data = json.loads(text) if path.endswith(".json") else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise SandboxConfigError(f"caisson sandbox config {path} is not valid {'JSON' if path.endswith('.json') else 'YAML'}: {exc}") from None
    if not isinstance(data, dict):
        raise SandboxConfigError(f"caisson sandbox config {path} holds a {type(data).__name__}, not a mapping: give {hint}")
    try:
        return CaissonSandboxConfig.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or '(top)'}: {e['msg']}" for e in exc.errors())
        raise SandboxConfigError(f"caisson sandbox config {path}: {problems}") from None


def _config(config: SandboxEnvironmentConfigType | None) -> CaissonSandboxConfig:
    if config is None:
        return CaissonSandboxConfig()
    if isinstance(config, CaissonSandboxConfig):
        return config
    if isinstance(config, str):
        if config not in _files:
            _files[config] = load_config_file(config)
        return _files[config]
    if isinstance(config, BaseModel):
        return CaissonSandboxConfig.model_validate(config.model_dump())
    raise SandboxConfigError(
        "caisson sandbox config must be a CaissonSandboxConfig, the path of a YAML or JSON file of its "
        f"fields, or omitted; not {type(config).__name__}: {config!r}"
    )


@sandboxenv(name="caisson")
class CaissonSandboxEnvironment(SandboxEnvironment):
    def __init__(self, session: Session) -> None:
        super().__init__()
        self.session = session
        # File access as the sandbox user, wherever that user may go.
        self._as_user = session.confined(Confinement(user=session.config.agent_user, level="dangerous"))

    # ---- lifecycle ------------------------------------------------------------------

    @classmethod
    def config_files(cls) -> list[str]:
        return list(CONFIG_FILES)

    @classmethod
    def config_deserialize(cls, config: dict[str, Any]) -> BaseModel:
        return CaissonSandboxConfig.model_validate(config)

    @classmethod
    async def task_init(cls, task_name: str, config: SandboxEnvironmentConfigType | None) -> None:
        cfg = _config(config)
        async with _lock():
            if _Shared.runtime is None:
                pool = PoolConfig(size=cfg.pool, session=cfg.session_config()) if cfg.pool else None
                runtime = Runtime(RuntimeConfig(pool=pool))
                await runtime.__aenter__()
                _Shared.runtime = runtime
            _Shared.users += 1
            runtime = _Shared.runtime
        try:
            await runtime.backend.prepare_image(cfg.image)
        except ImageError as exc:
            raise ValueError(f"caisson sandbox: {exc}") from None
        if cfg.pool and not await runtime.pool_ready(POOL_FILL_WAIT):
            log.warning("warm pool not full after task_init's wait; samples may start cold", waited=POOL_FILL_WAIT)

    @classmethod
    async def sample_init(
        cls, task_name: str, config: SandboxEnvironmentConfigType | None, metadata: dict[str, str]
    ) -> dict[str, SandboxEnvironment]:
        runtime = _Shared.runtime
        if runtime is None:  # used outside an eval's task_init (e.g. a script or a test)
            await cls.task_init(task_name, config)
            runtime = _Shared.runtime
            assert runtime is not None
        cfg = _config(config)
        if cfg.pool:
            await _pool_has_one(runtime)
        session = await runtime.open_session(cfg.session_config())
        return {"default": cls(session)}

    @classmethod
    async def sample_cleanup(
        cls,
        task_name: str,
        config: SandboxEnvironmentConfigType | None,
        environments: dict[str, SandboxEnvironment],
        interrupted: bool,
    ) -> None:
        sessions = [env.as_type(CaissonSandboxEnvironment).session for env in environments.values()]
        if sniffio.current_async_library() != "asyncio":
            for session in sessions:
                await session.close()
            return
        # Removing a container costs the engine up to seconds on a busy host: done after the
        # sample, so its slot goes to the next sample at once (task_cleanup waits for them).
        runtime = _Shared.runtime
        for session in sessions:
            task = asyncio.get_running_loop().create_task(_close_after_refill(runtime, session))
            _Shared.closing.add(task)
            task.add_done_callback(_Shared.closing.discard)

    @classmethod
    async def task_cleanup(cls, task_name: str, config: SandboxEnvironmentConfigType | None, cleanup: bool) -> None:
        async with _lock():
            runtime = _Shared.runtime
            if runtime is None:
                return
            _Shared.users = max(0, _Shared.users - 1)
            if _Shared.users:
                return
            _Shared.runtime = None
            closing, _Shared.closing = _Shared.closing, set()
        if closing:
            await asyncio.gather(*closing)
        if not cleanup:
            # --no-sandbox-cleanup: samples' containers stay (sample_cleanup was not called).
            left = list(runtime.sessions())
            for session in left:
                await session.detach()
                log.info("sandbox left running", session=session.id, container=session.container_id[:12])
            if left:
                _show_left([(s.id, s.container_id) for s in left])
        await runtime.__aexit__(None, None, None)

    @classmethod
    async def cli_cleanup(cls, id: str | None) -> None:
        """``inspect sandbox cleanup caisson [ID]``: remove the sandbox a session id or container
        id (full, or its first characters) names, or every sandbox Inspect left whose eval has
        ended; one whose owner process still runs stays unless CAISSON_CLEANUP_FORCE=1."""
        force = os.environ.get(FORCE_ENV, "") not in ("", "0")
        async with Runtime(RuntimeConfig(gc_on_start=False)) as rt:
            rows = await rt.backend.list_sandboxes()
            try:
                chosen = [select(rows, id)] if id is not None else [r for r in rows if r.tenant == TENANT]
            except CleanupRefused as exc:
                raise SystemExit(f"caisson: {exc}") from None
            done = await remove_leftovers(rt.backend, chosen, force=force)
        # Plain lines, whole ids: a table would cut them to fit a narrow terminal.
        for item in done:
            result = "removed" if item.removed else f"kept ({item.kept_because})"
            print(f"{result:8} {item.row.session_id}  {item.row.id[:12]}  {item.row.state}")
        if not done:
            print("caisson: no sandboxes left by Inspect on this engine")
        if any(not item.removed for item in done):
            message = (f"caisson: a sandbox whose owner is still running was kept: end that process (its own "
                       f"cleanup removes it), or set {FORCE_ENV}=1 to remove it anyway")
            if id is not None:
                raise SystemExit(message)
            print(message)

    # ---- commands ---------------------------------------------------------------------

    async def exec(
        self,
        cmd: list[str],
        input: str | bytes | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        user: str | None = None,
        timeout: int | None = None,
        timeout_retry: bool = True,
        concurrency: bool = True,
    ) -> ExecResult[str]:
        limit = SandboxEnvironmentLimits.MAX_EXEC_OUTPUT_SIZE
        try:
            res = await self.session.exec(
                cmd,
                stdin=input,
                cwd=self.session.resolve(cwd or "."),
                env=env,
                user=user,
                timeout=timeout,
                stdout_max=limit,
                stderr_max=limit,
            )
        except OpError as exc:
            if exc.code == "not_executable":
                raise PermissionError(exc.message) from None
            if exc.code in ("command_not_found", "cwd_not_found", "no_such_user"):
                # Inspect's contract: a command that cannot start is a failed result.
                return ExecResult(success=False, returncode=127 if exc.code == "command_not_found" else 126,
                                  stdout="", stderr=exc.message + "\n")
            raise
        if res.timed_out:
            raise TimeoutError(f"command timed out after {timeout} s: {shlex.join(cmd)[:200]}")
        if res.stdout_truncated or res.stderr_truncated:
            raise OutputLimitExceededError(
                limit_str=SandboxEnvironmentLimits.MAX_EXEC_OUTPUT_SIZE_STR,
                truncated_output=res.stdout if res.stdout_truncated else res.stderr,
            )
        code = res.exit_code if res.exit_code is not None else 128 + (res.signal or 9)
        return ExecResult(success=code == 0, returncode=code, stdout=res.stdout, stderr=res.stderr)

    # ---- files ------------------------------------------------------------------------

    async def write_file(self, file: str, contents: str | bytes) -> None:
        try:
            await self._as_user.write_file(file, contents, parents=True)
        except OpError as exc:
            raise _file_error(exc, file) from None

    @overload
    async def read_file(self, file: str, text: Literal[True] = True) -> str: ...

    @overload
    async def read_file(self, file: str, text: Literal[False]) -> bytes: ...

    async def read_file(self, file: str, text: bool = True) -> str | bytes:
        try:
            data = await self._as_user.read_file(file, max_size=SandboxEnvironmentLimits.MAX_READ_FILE_SIZE)
        except OpError as exc:
            raise _file_error(exc, file) from None
        # newline="" semantics: line endings stay as they are.
        return data.decode("utf-8") if text else data

    async def connection(self, *, user: str | None = None) -> SandboxConnection:
        who = user or self.session.config.agent_user
        container = self.session.container_id
        command = ["docker", "exec", "-it", "--user", who, "--workdir", self.session.config.workdir, container, "bash", "-l"]
        return SandboxConnection(type="caisson", command=shlex.join(command), container=container)


async def _pool_has_one(runtime: Runtime) -> None:
    """Wait (a while) for the pool to hold a started container. A sample that started one cold
    meanwhile would add its start to the refills on the same engine, slowing both; measured
    with 4 samples at once on a busy 2-core host, that raised sample_init's p95 from 2 s to 7 s."""
    with anyio.move_on_after(POOL_WAIT):
        while not runtime.backend.pool_session_ids():
            await anyio.sleep(0.02)


async def _close_after_refill(runtime: Runtime | None, session: Session) -> None:
    """Close a sample's session once the warm pool is full again (or after POOL_WAIT): the
    engine removing containers while it starts the next samples' slowed the refill that those
    samples wait on."""
    if runtime is not None:
        await runtime.pool_ready(POOL_WAIT)  # at once without a pool
    await session.close()


def _show_left(left: list[tuple[str, str]]) -> None:
    """What --no-sandbox-cleanup left, and how to remove it, where an Inspect user looks."""
    table = Table(title="caisson sandboxes left running (--no-sandbox-cleanup):", title_justify="left")
    table.add_column("Session", no_wrap=True)
    table.add_column("Container", no_wrap=True)
    for session_id, container in left:
        table.add_row(session_id, container[:12])
    show(table)
    show("Remove all of them: inspect sandbox cleanup caisson\nRemove one: inspect sandbox cleanup caisson CONTAINER\n")


def _file_error(exc: OpError, file: str) -> Exception:
    if exc.code == "output_limit":
        return OutputLimitExceededError(limit_str=SandboxEnvironmentLimits.MAX_READ_FILE_SIZE_STR, truncated_output=None)
    kind: type[Exception] = {
        "not_found": FileNotFoundError,
        "permission_denied": PermissionError,
        "is_a_directory": IsADirectoryError,
        "not_a_directory": NotADirectoryError,
    }.get(exc.code, OSError)
    detail = "is a directory" if exc.code == "is_a_directory" else exc.message
    return kind(f"{file}: {detail}")
