"""caisson as a mini-swe-agent environment.

``environment_class: runtime.integrations.mini_swe_agent.CaissonEnvironment`` in a
mini-swe-agent config (or ``CaissonEnvironment(image=..., cwd=...)`` in code) runs each
episode's commands in its own caisson session instead of a ``docker exec`` per command.
mini-swe-agent is synchronous and runs episodes in threads: all environments of a process
share one Runtime on one event-loop thread, opened by the first and closed by the last.
Call ``cleanup()`` when an episode ends; a process that exits without it leaves sessions
that end by themselves a grace period later.
"""

from __future__ import annotations

import logging
import os
import threading
from contextlib import AbstractContextManager
from typing import Any

from anyio.from_thread import BlockingPortal, start_blocking_portal
from minisweagent.exceptions import Submitted
from minisweagent.utils.serialize import recursive_merge
from pydantic import BaseModel, ConfigDict, Field

from caisson.config import Limits, SessionConfig
from caisson.errors import OpError
from caisson.runtime import Runtime
from caisson.session import Session

SUBMIT_MARKER = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"


class CaissonEnvironmentConfig(BaseModel):
    """mini-swe-agent's docker environment settings, plus caisson's session settings."""

    model_config = ConfigDict(extra="forbid")

    image: str | None = Field(None, description="any image with python3; default: caisson's own")
    cwd: str = "/workspace"
    env: dict[str, str] = {}
    forward_env: list[str] = []
    timeout: int = 30
    interpreter: list[str] = ["bash", "-lc"]
    user: str = "agent"
    limits: Limits = Field(default_factory=Limits)
    network: bool = False
    gvisor: bool = False
    ttl: float = 6 * 3600.0


class _Shared:
    lock = threading.Lock()
    portal_cm: AbstractContextManager[BlockingPortal] | None = None
    portal: BlockingPortal | None = None
    runtime: Runtime | None = None
    users = 0


def _acquire() -> tuple[BlockingPortal, Runtime]:
    with _Shared.lock:
        if _Shared.portal is None or _Shared.runtime is None:
            cm = start_blocking_portal()
            portal = cm.__enter__()
            runtime = Runtime()
            try:
                portal.call(runtime.__aenter__)
            except BaseException:
                cm.__exit__(None, None, None)
                raise
            _Shared.portal_cm, _Shared.portal, _Shared.runtime = cm, portal, runtime
        _Shared.users += 1
        return _Shared.portal, _Shared.runtime


def _release() -> None:
    with _Shared.lock:
        _Shared.users -= 1
        if _Shared.users > 0 or _Shared.portal is None or _Shared.runtime is None:
            return
        portal, runtime, cm = _Shared.portal, _Shared.runtime, _Shared.portal_cm
        _Shared.portal = _Shared.runtime = _Shared.portal_cm = None
    try:
        portal.call(runtime.__aexit__, None, None, None)
    finally:
        if cm is not None:
            cm.__exit__(None, None, None)


class CaissonEnvironment:
    def __init__(
        self, *, config_class: type[CaissonEnvironmentConfig] = CaissonEnvironmentConfig,
        logger: logging.Logger | None = None, **kwargs: Any,
    ) -> None:
        self.logger = logger or logging.getLogger("minisweagent.environment")
        self.config = config_class(**kwargs)
        self._portal, runtime = _acquire()
        try:
            self.session: Session | None = self._portal.call(
                lambda: runtime.open_session(
                    SessionConfig(
                        image=self.config.image,
                        workdir=self.config.cwd,
                        agent_user=self.config.user,
                        limits=self.config.limits,
                        network=self.config.network,
                        gvisor=self.config.gvisor,
                        ttl=self.config.ttl,
                        idle_timeout=None,  # the model may think for a long time between commands
                    )
                )
            )
        except BaseException:
            _release()
            raise
        self.logger.info("caisson session %s started", self.session.id)

    def execute(self, action: dict[str, Any], cwd: str = "", *, timeout: int | None = None) -> dict[str, Any]:
        """Run ``action["command"]`` with the interpreter; stdout and stderr interleaved, as a
        terminal shows them."""
        session = self._session()
        env = {k: v for k in self.config.forward_env if (v := os.environ.get(k)) is not None}
        env.update(self.config.env)
        limit = timeout or self.config.timeout
        argv = ["sh", "-c", 'exec "$@" 2>&1', "sh", *self.config.interpreter, action.get("command", "")]
        try:
            res = self._portal.call(
                lambda: session.exec(argv, cwd=cwd or self.config.cwd, env=env, timeout=limit, stdout_max=10 * 1024 * 1024)
            )
        except OpError as exc:
            return {"output": "", "returncode": -1, "exception_info": f"An error occurred while executing the command: {exc}",
                    "extra": {"exception_type": exc.code, "exception": str(exc)}}
        if res.timed_out:
            output = {
                "output": res.stdout,
                "returncode": -1,
                "exception_info": f"An error occurred while executing the command: timed out after {limit} seconds",
                "extra": {"exception_type": "TimeoutExpired", "exception": f"timed out after {limit} seconds"},
            }
        else:
            code = res.exit_code if res.exit_code is not None else 128 + (res.signal or 9)
            output = {"output": res.stdout, "returncode": code, "exception_info": ""}
        self._check_finished(output)
        return output

    def _check_finished(self, output: dict[str, Any]) -> None:
        lines = output.get("output", "").lstrip().splitlines(keepends=True)
        if lines and lines[0].strip() == SUBMIT_MARKER and output["returncode"] == 0:
            submission = "".join(lines[1:])
            raise Submitted(
                {"role": "exit", "content": submission, "extra": {"exit_status": "Submitted", "submission": submission}}
            )

    def get_template_vars(self, **kwargs: Any) -> dict[str, Any]:
        # The sandbox's own system, not the host's, for prompts that mention it.
        uname = self.execute({"command": "uname -s; uname -n; uname -r; uname -v; uname -m"}, timeout=10)
        keys = ("system", "node", "release", "version", "machine")
        system = dict(zip(keys, uname["output"].splitlines(), strict=False))
        return recursive_merge(self.config.model_dump(), system, kwargs)  # type: ignore[no-any-return]

    def serialize(self) -> dict[str, Any]:
        return {
            "info": {
                "config": {
                    "environment": self.config.model_dump(mode="json"),
                    "environment_type": f"{type(self).__module__}.{type(self).__name__}",
                }
            }
        }

    def _session(self) -> Session:
        if self.session is None:
            raise RuntimeError("this environment was cleaned up")
        return self.session

    def cleanup(self) -> None:
        session, self.session = self.session, None
        if session is None:
            return
        try:
            self._portal.call(session.close)
        finally:
            _release()
