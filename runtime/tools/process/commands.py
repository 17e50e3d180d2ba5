"""run_code (a command or a script file, interpreter inferred) and exec (one executable
with arguments, no shell). Neither goes through a shell: words are split the way a shell
would split them, but nothing is expanded, piped or chained."""

from __future__ import annotations

import posixpath
import shlex
from typing import TYPE_CHECKING, Literal

from pydantic import Field, model_validator

from caisson.client.models import ExecResult
from caisson.errors import OpError
from caisson.policy import Level, check_exec_metacharacters
from caisson.tools.base import ToolError, ToolResult, tool
from caisson.tools.process.shell import (
    STDERR_MAX,
    STDOUT_MAX,
    TimedInput,
    check_env,
    process_result,
    reject_destructive,
)

if TYPE_CHECKING:
    from caisson.tools.context import ToolContext

INTERPRETERS = {
    ".py": "python3",
    ".sh": "bash",
    ".bash": "bash",
    ".js": "node",
    ".mjs": "node",
    ".cjs": "node",
    ".ts": "ts-node",
    ".rb": "ruby",
}


def _split(command: str) -> list[str]:
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise ToolError("invalid_command", f"cannot split the command into words: {exc}") from None
    if not argv:
        raise ToolError("invalid_command", "the command is empty")
    return argv


async def _run(ctx: ToolContext, argv: list[str], cwd: str, env: dict[str, str], timeout: float) -> ToolResult:
    try:
        res: ExecResult = await ctx.client.exec(
            argv, cwd=cwd, env=env, timeout=timeout, stdout_max=STDOUT_MAX, stderr_max=STDERR_MAX
        )
    except OpError as exc:
        if exc.code == "cwd_not_found":
            raise ToolError("invalid_cwd", f"cwd {cwd} is not an existing directory") from None
        if exc.code in ("command_not_found", "not_executable"):
            raise ToolError("command_not_found", f"cannot run {argv[0]!r} in the sandbox: {exc.message}") from None
        raise
    return process_result(res, stdout_max=STDOUT_MAX, stderr_max=STDERR_MAX, timeout=timeout, extra={"argv": argv})


class RunCodeInput(TimedInput):
    mode: Literal["command", "file"] | None = Field(
        None, description='"command" or "file"; inferred from which of command/file is given'
    )
    command: str | None = Field(None, description="Command to run (split into words; no shell)")
    file: str | None = Field(None, description="Script file to run")
    interpreter: str | None = Field(
        None, description="Interpreter for the file (default from its extension: .py .sh .js .ts .rb)"
    )
    args: list[str] = Field(default_factory=list, description="Arguments passed to the script or command")
    cwd: str | None = Field(None, description="Working directory (default: the session's)")
    env: dict[str, str] | None = Field(None, description="Extra environment variables")

    @model_validator(mode="after")
    def _one_source(self) -> RunCodeInput:
        mode = self.mode or ("file" if self.file is not None else "command")
        if mode == "command" and not self.command:
            raise ValueError("mode command needs `command`")
        if mode == "file" and not self.file:
            raise ValueError("mode file needs `file`")
        if mode == "command" and self.interpreter:
            raise ValueError("`interpreter` applies to mode file; put the interpreter in `command`")
        self.mode = mode
        return self


def _run_code_command(a: RunCodeInput) -> str:
    if a.mode == "file":
        interpreter = a.interpreter or INTERPRETERS.get(posixpath.splitext(a.file or "")[1].lower(), "")
        return shlex.join([*shlex.split(interpreter), a.file or "", *a.args])
    return shlex.join([*shlex.split(a.command or ""), *a.args])


@tool(
    "run_code",
    RunCodeInput,
    level=Level.DANGEROUS,
    access="execute",
    snippet="Run a command or a script file (interpreter from its extension); returns stdout, stderr, exit code",
    command=_run_code_command,
    paths=lambda a: [p for p in (a.cwd, a.file and posixpath.join(a.cwd or ".", a.file)) if p],
)
async def run_code(ctx: ToolContext, args: RunCodeInput) -> ToolResult:
    cwd = ctx.resolve(args.cwd) if args.cwd else ctx.cwd
    env = check_env(args.env)
    if args.mode == "file":
        path = posixpath.normpath(posixpath.join(cwd, args.file or ""))
        ext = posixpath.splitext(path)[1].lower()
        interpreter = args.interpreter or INTERPRETERS.get(ext)
        if not interpreter:
            known = ", ".join(sorted(INTERPRETERS))
            raise ToolError(
                "unknown_interpreter",
                f"cannot infer an interpreter for {posixpath.basename(path)!r} (known: {known}); pass `interpreter`",
            )
        st = await ctx.client.stat(path)
        if not st.exists:
            raise ToolError("not_found", f"script file not found: {path}")
        if st.type == "dir":
            raise ToolError("is_a_directory", f"{path} is a directory, not a script file")
        argv = [*_split(interpreter), path, *args.args]
    else:
        argv = [*_split(args.command or ""), *args.args]
        reject_destructive(shlex.join(argv))
    return await _run(ctx, argv, cwd, env, args.timeout)


class ExecInput(TimedInput):
    command: str = Field(min_length=1, description="Executable and its arguments (no shell: no pipes, chains or $())")
    cwd: str | None = Field(None, description="Working directory inside the workspace (default: the workspace root)")
    env: dict[str, str] | None = Field(None, description="Extra environment variables")


async def _workspace_dir(ctx: ToolContext, cwd: str | None) -> str:
    """``cwd`` (relative to the workspace root) after checking it lies inside the workspace,
    symbolic links resolved."""
    root = ctx.config.workdir
    path = posixpath.normpath(posixpath.join(root, cwd or "."))
    st = await ctx.client.stat(path)
    if not st.exists:
        raise ToolError("invalid_cwd", f"cwd {path} does not exist")
    if st.type != "dir":
        raise ToolError("invalid_cwd", f"cwd {path} is not a directory")
    root_real = (await ctx.client.stat(root)).realpath or root
    real = st.realpath or path
    if real != root_real and not real.startswith(root_real.rstrip("/") + "/"):
        raise ToolError("cwd_outside_workspace", f"cwd {path} is outside the workspace {root}")
    return path


@tool(
    "exec",
    ExecInput,
    level=Level.DANGEROUS,
    access="execute",
    snippet="Run one executable with arguments, without a shell; returns stdout, stderr, exit code",
    command=lambda a: a.command,
)
async def exec_(ctx: ToolContext, args: ExecInput) -> ToolResult:
    problem = check_exec_metacharacters(args.command)
    if problem:
        raise ToolError("shell_metacharacters", f"Command rejected: {problem} Use bash for pipes and chains.")
    reject_destructive(args.command)
    argv = _split(args.command)
    cwd = await _workspace_dir(ctx, args.cwd)
    return await _run(ctx, argv, cwd, check_env(args.env), args.timeout)
