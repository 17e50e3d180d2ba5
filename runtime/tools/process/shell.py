"""bash: run a command in the session's container, keeping shell state between calls.

Persistent mode (the default). Each call is one ``exec`` of ``bash -c PROLOGUE+EPILOGUE``
with the agent's command passed as an argument and run by ``eval`` in that shell, so
``cd`` and ``export`` act on it. The prologue restores the exported environment from a
state file in the container; an EXIT trap (which also runs after ``exit`` or ``set -e``)
writes it back and reports the final working directory on stderr behind a per-session
nonce, which the host strips and stores as the client's ``cwd``. The host passes that
directory as the next call's cwd (a reattached controller's first call returns to the
directory saved in the container). Past the very first call, everything is bash
builtins: no extra process, no extra round trip.

Stateless mode (``SessionConfig.stateless_bash``): every call starts in the session's
root directory with the base environment.
"""

from __future__ import annotations

import functools
import posixpath
import re
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import Field, field_validator

from caisson.client.models import Confinement, ExecResult, SpawnResult
from caisson.client.primitives import SandboxClient
from caisson.errors import OpError
from caisson.policy import Level, classify_bash
from caisson.tools.base import ToolError, ToolErrorInfo, ToolInput, ToolResult, tool

if TYPE_CHECKING:
    from caisson.tools.context import ToolContext

# Where the state lives: tmpfs when the container has one, because rewriting a small file
# on the overlay filesystem costs ~1.5 ms (ext4 flushes truncated-then-rewritten files)
# against ~0.05 ms on tmpfs.
STATE_DIRS = ("/dev/shm/.caisson-shell", "/tmp/.caisson/shell")
DEFAULT_TIMEOUT = 120.0
MIN_TIMEOUT = 1.0
MAX_TIMEOUT = 600.0
STDOUT_MAX = 100 * 1024
STDERR_MAX = 50 * 1024
# Room on stderr for the cwd report (nonce twice + a path), beyond the agent's own cap.
REPORT_ROOM = 8192
TRUNCATED_NOTE = "[Output truncated due to size limit]"
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

R = TypeVar("R")

# $1 nonce, $2 the command, $3 "1" to return to the saved directory (the first call of a
# reattached controller), then name/value pairs of this call's env. Restores the saved
# exports (the first call ever records the base environment's names instead), then
# applies this call's env, remembering what it shadows.
_PROLOGUE = r"""__cs_m=$1 __cs_c=$2 __cs_r=$3
shift 3
__cs_d=%(shm)s
[[ -w ${__cs_d%%/*} ]] || __cs_d=%(tmp)s
declare -A __cs_v=() __cs_p=()
while (($# > 1)); do __cs_v[$1]=$2; shift 2; done
if [[ -r $__cs_d/env ]]; then
  __cs_pwd=$PWD
  . "$__cs_d/env" 2>/dev/null
  PWD=$__cs_pwd
  if [[ $__cs_r == 1 && -r $__cs_d/cwd ]]; then
    IFS= read -r -d '' __cs_w <"$__cs_d/cwd"
    cd -- "$__cs_w" 2>/dev/null
  fi
else
  [[ -d $__cs_d ]] || mkdir -p -- "$__cs_d"
  compgen -e >|"$__cs_d/base"
fi
for __cs_n in "${!__cs_v[@]}"; do
  [[ ${!__cs_n@a} == *x* ]] && __cs_p[$__cs_n]=${!__cs_n}
  export "$__cs_n=${__cs_v[$__cs_n]}"
done
""" % {"shm": STATE_DIRS[0], "tmp": STATE_DIRS[1]}  # noqa: UP031  (bash braces would all need doubling)

# Resets the agent's shell options that would break it (set -eu, noclobber), puts back
# what this call's env shadowed (it is not session state), saves the exports plus an
# `unset` for each base variable the agent removed, and reports the working directory.
_EPILOGUE = r"""__cs_save() {
  set +eu
  local __cs_n __cs_b=()
  for __cs_n in "${!__cs_v[@]}"; do
    if [[ -v __cs_p[$__cs_n] ]]; then export "$__cs_n=${__cs_p[$__cs_n]}"; else unset "$__cs_n"; fi
  done
  [[ -d $__cs_d ]] || mkdir -p -- "$__cs_d"
  [[ -r $__cs_d/base ]] && mapfile -t __cs_b <"$__cs_d/base"
  {
    export -p
    for __cs_n in "${__cs_b[@]}"; do [[ ${!__cs_n@a} == *x* ]] || printf 'unset %s\n' "$__cs_n"; done
  } >|"$__cs_d/env"
  printf '%s' "$PWD" >|"$__cs_d/cwd"
  printf '\n%s%s%s' "$__cs_m" "$PWD" "$__cs_m" >&2
}
trap __cs_save EXIT
:
eval "$__cs_c"
"""


def _one_line(script: str) -> str:
    """The script on one line, so bash reports errors in the agent's command as on line 1."""
    out = ""
    for line in filter(None, (raw.strip() for raw in script.splitlines())):
        out += line + (" " if line.endswith(("then", "do", "else", "{")) else "; ")
    return out


PERSISTENT_SCRIPT = _one_line(_PROLOGUE + _EPILOGUE)
# Background tasks start from the session's state but do not change it.
BACKGROUND_SCRIPT = _one_line(_PROLOGUE + ':\neval "$__cs_c"')


@dataclass
class ShellState:
    # A nonce the agent's own output cannot guess, marking the cwd report on stderr.
    nonce: str = field(default_factory=lambda: f"\x1f__caisson_cwd_{secrets.token_hex(8)}__\x1f")
    # Until this Session's first report, the container may hold a directory from an
    # earlier controller (reattach); that call returns to it.
    synced: bool = False
    # Whether the state directories exist: made once by the tool, since a command confined to
    # read-only cannot create them.
    prepared: bool = False


async def state_client(ctx: ToolContext) -> SandboxClient:
    """The session's client, allowed to keep the shell's state whatever the command's level."""
    client = ctx.client.writable(*STATE_DIRS)
    state = shell_state(ctx)
    if not state.prepared:
        # Made as the agent, without the call's roots: the directories lie outside them.
        maker = ctx.client.confined(Confinement(user=ctx.config.agent_user))
        for directory in STATE_DIRS:
            try:
                await maker.mkdir(directory)
            except OpError:
                continue  # no /dev/shm here: the script falls back to the next directory
        state.prepared = True
    return client


def shell_state(ctx: ToolContext) -> ShellState:
    return ctx.tool_state("shell", ShellState)


def clamp_timeout(value: float | None) -> float:
    if value is None:
        return DEFAULT_TIMEOUT
    return min(MAX_TIMEOUT, max(MIN_TIMEOUT, float(value)))


def check_env(env: dict[str, str] | None) -> dict[str, str]:
    env = env or {}
    for name in env:
        if not ENV_NAME.fullmatch(name):
            raise ToolError("invalid_env", f"invalid environment variable name {name!r}")
    return env


@functools.lru_cache(maxsize=64)
def _destructive(command: str) -> str | None:
    # The policy has just classified the same command: agents repeat theirs, and the
    # classification of a string is always the same.
    return classify_bash(command).destructive


def reject_destructive(command: str) -> None:
    pattern = _destructive(command)
    if pattern:
        raise ToolError(
            "destructive_command",
            f"Command rejected: it matches the known-destructive pattern {pattern!r}. "
            "It was not run. If you need this effect, do it in a narrower, explicit way.",
            {"pattern": pattern},
        )


def take_report(stderr: str, nonce: str) -> tuple[str, str | None]:
    """stderr without the epilogue's cwd report, and the reported directory (None if absent)."""
    end = stderr.rfind(nonce)
    start = stderr.rfind(nonce, 0, end) if end > 0 else -1
    if start < 0:
        return stderr, None
    cwd = stderr[start + len(nonce) : end]
    cut = start - 1 if start > 0 and stderr[start - 1] == "\n" else start
    return stderr[:cut] + stderr[end + len(nonce) :], cwd


def render_output(
    stdout: str,
    stderr: str,
    *,
    truncated: bool,
    exit_code: int | None,
    signal: int | None,
    timed_out: bool,
    timeout: float | None,
) -> str:
    """The text form of a finished command: stdout, stderr, then notes (truncation, exit)."""
    body = stdout
    if stderr:
        if body and not body.endswith("\n"):
            body += "\n"
        body += stderr
    lines = [body.rstrip("\n")] if body.strip() else []
    if truncated:
        lines.append(TRUNCATED_NOTE)
    if timed_out:
        lines.append(f"[Command timed out after {timeout:g} s; its whole process tree was killed]")
    elif signal is not None and exit_code is None:
        lines.append(f"[Killed by signal {signal}]")
    if exit_code not in (0, None):
        lines.append(f"[Exit code: {exit_code}]")
    return "\n".join(lines) if lines else "(no output)"


def process_result(
    res: ExecResult,
    *,
    stdout_max: int,
    stderr_max: int,
    stderr: str | None = None,
    stderr_total: int | None = None,
    timeout: float | None,
    extra: dict[str, Any] | None = None,
) -> ToolResult:
    """A ToolResult for a finished process (bash, run_code, exec); a timeout is a failure
    that still carries the partial output."""
    err = res.stderr if stderr is None else stderr
    err_total = res.stderr_total if stderr_total is None else stderr_total
    err_truncated = res.stderr_truncated or len(err.encode()) > stderr_max
    if err_truncated:
        err = err.encode()[:stderr_max].decode("utf-8", "ignore")
    truncated = res.stdout_truncated or err_truncated
    text = render_output(
        res.stdout, err, truncated=truncated, exit_code=res.exit_code, signal=res.signal,
        timed_out=res.timed_out, timeout=timeout,
    )
    data: dict[str, Any] = {
        "stdout": res.stdout,
        "stderr": err,
        "exit_code": res.exit_code,
        "signal": res.signal,
        "timed_out": res.timed_out,
        "stdout_truncated": res.stdout_truncated,
        "stderr_truncated": err_truncated,
        "stdout_total": res.stdout_total,
        "stderr_total": err_total,
        "duration_ms": round(res.duration * 1000, 3),
        **(extra or {}),
    }
    truncation = (
        {"stdout_total": res.stdout_total, "stderr_total": err_total,
         "stdout_max": stdout_max, "stderr_max": stderr_max}
        if truncated
        else None
    )
    error = None
    if res.timed_out:
        error = ToolErrorInfo(code="timeout", message=f"command timed out after {timeout:g} s")
    return ToolResult(ok=error is None, text=text, data=data, error=error, truncated=truncated, truncation=truncation)


class TimedInput(ToolInput):
    timeout: float = Field(
        DEFAULT_TIMEOUT, description="Timeout in seconds (default 120, at most 600; below 1 is raised to 1)"
    )

    @field_validator("timeout", mode="before")
    @classmethod
    def _clamp(cls, value: Any) -> Any:
        return clamp_timeout(value) if isinstance(value, int | float) and not isinstance(value, bool) else value


class BashInput(TimedInput):
    command: str = Field(min_length=1, description="Bash command to execute")
    working_dir: str | None = Field(
        None, description="Directory to run in; it stays the working directory for later commands"
    )
    env: dict[str, str] | None = Field(None, description="Extra environment variables for this command only")
    run_in_background: bool = Field(False, description="Start as a background task and return its id at once")
    background_timeout: float | None = Field(
        None, gt=0, description="Seconds after which a background task is killed (default: none)"
    )
    stdout_max: int = Field(STDOUT_MAX, ge=1, le=8 * 1024 * 1024, description="stdout cap in bytes")
    stderr_max: int = Field(STDERR_MAX, ge=1, le=8 * 1024 * 1024, description="stderr cap in bytes")
    stateless: bool | None = Field(
        None, description="Run from the root directory and base environment, keeping no state (default: session option)"
    )


async def _exec_with_cwd_fallback(
    ctx: ToolContext, run: Callable[[str], Awaitable[R]], cwd: str, explicit: bool
) -> tuple[R, str]:
    """Run ``run(cwd)``; when the remembered directory has vanished, reset to the root."""
    try:
        return await run(cwd), ""
    except OpError as exc:
        if exc.code != "cwd_not_found":
            raise
        if explicit:
            raise ToolError("invalid_working_dir", f"working_dir {cwd} is not an existing directory") from None
    root = ctx.config.workdir
    ctx.client.cwd = root
    note = f"[The working directory {cwd} no longer exists; running in {root}]\n"
    return await run(root), note


@tool(
    "bash",
    BashInput,
    level=Level.DANGEROUS,
    access="execute",
    snippet="Run a bash command in the sandbox (cwd and exported variables persist between calls)",
    guidelines=(
        "Use run_in_background for servers and long jobs, then task_output to read them.",
        "Prefer the file and search tools over cat/sed/grep for reading and editing files.",
    ),
    command=lambda a: a.command,
    paths=lambda a: [a.working_dir] if a.working_dir else [],
)
async def bash(ctx: ToolContext, args: BashInput) -> ToolResult:
    reject_destructive(args.command)
    env = check_env(args.env)
    stateless = ctx.config.stateless_bash if args.stateless is None else args.stateless
    explicit = args.working_dir is not None
    cwd = ctx.resolve(args.working_dir or "") if explicit else (ctx.config.workdir if stateless else ctx.cwd)
    state = shell_state(ctx)

    if args.run_in_background:
        return await _background(ctx, args, cwd, env, stateless, explicit)

    if stateless:
        async def run(where: str) -> ExecResult:
            return await ctx.client.exec(
                args.command, cwd=where, env=env, timeout=args.timeout,
                stdout_max=args.stdout_max, stderr_max=args.stderr_max,
            )

        res, note = await _exec_with_cwd_fallback(ctx, run, cwd, explicit)
        return _with_note(process_result(
            res, stdout_max=args.stdout_max, stderr_max=args.stderr_max, timeout=args.timeout,
            extra={"cwd": cwd},
        ), note)

    pairs = [item for kv in env.items() for item in kv]
    resume = "0" if explicit or state.synced else "1"

    client = await state_client(ctx)

    async def run_persistent(where: str) -> ExecResult:
        return await client.exec(
            ["bash", "-c", PERSISTENT_SCRIPT, "bash", state.nonce, args.command, resume, *pairs],
            cwd=where, timeout=args.timeout,
            stdout_max=args.stdout_max, stderr_max=args.stderr_max + REPORT_ROOM,
        )

    res, note = await _exec_with_cwd_fallback(ctx, run_persistent, cwd, explicit)
    stderr, reported = take_report(res.stderr, state.nonce)
    report_len = len(res.stderr.encode()) - len(stderr.encode())
    if reported is None and res.stderr_truncated and not res.timed_out:
        # The report was cut off with the rest of stderr; the state file still has it.
        reported = await _saved_cwd(client)
        if reported is not None:
            report_len = 1 + 2 * len(state.nonce.encode()) + len(reported.encode())
    if reported is not None:
        ctx.client.cwd = reported
        state.synced = True
    elif explicit:
        ctx.client.cwd = cwd
    stderr_total = res.stderr_total - report_len
    result = process_result(
        res, stdout_max=args.stdout_max, stderr_max=args.stderr_max, stderr=stderr,
        stderr_total=stderr_total, timeout=args.timeout, extra={"cwd": ctx.cwd},
    )
    return _with_note(result, note)


def _with_note(result: ToolResult, note: str) -> ToolResult:
    if note:
        result.text = note + result.text
    return result


async def _saved_cwd(client: SandboxClient) -> str | None:
    for directory in STATE_DIRS:
        try:
            # Plain: the agent owns this directory, and a link there could lead to a secret.
            text = (await client.read_range(posixpath.join(directory, "cwd"), plain=True)).data.decode("utf-8", "replace")
        except OpError:
            continue
        if text.startswith("/"):
            return text
    return None


async def _background(
    ctx: ToolContext, args: BashInput, cwd: str, env: dict[str, str], stateless: bool, explicit: bool
) -> ToolResult:
    name = args.command if len(args.command) <= 500 else args.command[:497] + "..."
    state = shell_state(ctx)
    resume = "0" if explicit or state.synced else "1"

    client = ctx.client if stateless else await state_client(ctx)

    async def run(where: str) -> SpawnResult:
        if stateless:
            return await client.spawn(args.command, cwd=where, env=env, timeout=args.background_timeout, name=name)
        pairs = [item for kv in env.items() for item in kv]
        return await client.spawn(
            ["bash", "-c", BACKGROUND_SCRIPT, "bash", state.nonce, args.command, resume, *pairs],
            cwd=where, timeout=args.background_timeout, name=name,
        )

    spawned, note = await _exec_with_cwd_fallback(ctx, run, cwd, explicit)
    if explicit and not stateless:
        ctx.client.cwd = cwd
    limit = f"; it is killed after {args.background_timeout:g} s" if args.background_timeout else ""
    text = (
        f"{note}Started background task {spawned.task_id} (pid {spawned.pid}){limit}. "
        f"Read its output with task_output, send input with task_input, stop it with task_kill."
    )
    return ToolResult.success(text, {"task_id": spawned.task_id, "pid": spawned.pid, "cwd": cwd})
