"""caisson as an Inspect AI sandbox: ``sandbox="caisson"`` or ``sandbox=("caisson", config)``.

Registered through the ``inspect_ai`` entry point, so installing caisson next to Inspect is
enough. One Runtime per process serves every task that uses the provider (with a warm pool
when the config asks for one); each sample gets its own session. Commands run as the
session's agent user unless ``user`` says otherwise, and file reads and writes are done with
that user's permissions, as a shell in the sandbox would.
"""

from __future__ import annotations

import shlex
from typing import Any, Literal, overload

import anyio
from inspect_ai.util import (
    ExecResult,
    OutputLimitExceededError,
    SandboxConnection,
    SandboxEnvironment,
    SandboxEnvironmentConfigType,
    SandboxEnvironmentLimits,
    sandboxenv,
)
from pydantic import BaseModel, ConfigDict, Field

from caisson.client.models import Confinement
from caisson.config import Limits, PoolConfig, RuntimeConfig, SessionConfig
from caisson.docker import containers, images, reaper
from caisson.errors import OpError
from caisson.logs import get_logger
from caisson.runtime import Runtime
from caisson.session import Session

log = get_logger("caisson.inspect")


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
            # A sample may sit idle while the model thinks for a long time.
            idle_timeout=None,
        )


class _Shared:
    """The process's Runtime, opened by the first task that needs it, closed by the last."""

    runtime: Runtime | None = None
    users = 0
    lock: anyio.Lock | None = None


def _lock() -> anyio.Lock:
    if _Shared.lock is None:
        _Shared.lock = anyio.Lock()
    return _Shared.lock


def _config(config: SandboxEnvironmentConfigType | None) -> CaissonSandboxConfig:
    if config is None:
        return CaissonSandboxConfig()
    if isinstance(config, CaissonSandboxConfig):
        return config
    if isinstance(config, BaseModel):
        return CaissonSandboxConfig.model_validate(config.model_dump())
    raise ValueError(
        f"caisson sandbox config must be a CaissonSandboxConfig (or omitted), not {type(config).__name__}: {config!r}"
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
        if cfg.image is None:
            await anyio.to_thread.run_sync(images.build_image, runtime.client)
        elif not await anyio.to_thread.run_sync(images.has_image, runtime.client, cfg.image):
            raise ValueError(f"caisson sandbox: image {cfg.image} is not on the Docker engine; build or pull it first")

    @classmethod
    async def sample_init(
        cls, task_name: str, config: SandboxEnvironmentConfigType | None, metadata: dict[str, str]
    ) -> dict[str, SandboxEnvironment]:
        runtime = _Shared.runtime
        if runtime is None:  # used outside an eval's task_init (e.g. a script or a test)
            await cls.task_init(task_name, config)
            runtime = _Shared.runtime
            assert runtime is not None
        session = await runtime.open_session(_config(config).session_config())
        return {"default": cls(session)}

    @classmethod
    async def sample_cleanup(
        cls,
        task_name: str,
        config: SandboxEnvironmentConfigType | None,
        environments: dict[str, SandboxEnvironment],
        interrupted: bool,
    ) -> None:
        for env in environments.values():
            await env.as_type(CaissonSandboxEnvironment).session.close()

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
        if not cleanup:
            # --no-sandbox-cleanup: samples' containers stay (sample_cleanup was not called).
            for session in runtime.sessions():
                await session.detach()
                log.info("sandbox left running", session=session.id, container=session.container_id[:12])
        await runtime.__aexit__(None, None, None)

    @classmethod
    async def cli_cleanup(cls, id: str | None) -> None:
        """``inspect sandbox cleanup caisson [session-id]``: remove one session's container, or
        every caisson container (whoever started it)."""
        client = await anyio.to_thread.run_sync(containers.connect, None)
        if id is None:
            await anyio.to_thread.run_sync(lambda: reaper.collect(client, all_owners=True))
            return
        row = await anyio.to_thread.run_sync(containers.find_session_container, client, id)
        if row is not None:
            await anyio.to_thread.run_sync(containers.remove_container, client, str(row["Id"]))

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
