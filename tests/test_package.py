"""The package as a user gets it: built into a wheel, installed into a fresh virtual
environment, used from a directory outside the checkout. And the library used from tasks
the way an embedding program does."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from caisson import Runtime, Session
from caisson.config import RuntimeConfig

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = """
import anyio, runtime
from caisson import Runtime

async def main():
    async with Runtime() as rt:
        async with rt.session() as s:
            r = await s.exec("echo hello from $(whoami)")
            print(r.stdout.strip(), r.exit_code)
            print((await s.call("bash", {"command": "echo tool ok"})).text.strip())
            print("clone-exec", (await s.ping()).clone_exec)
    print(caisson.__file__)

anyio.run(main)
"""


def test_wheel_installs_and_opens_a_session(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels), str(ROOT)],
        check=True, cwd=tmp_path,
    )
    [wheel] = wheels.glob("caisson_runtime-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([venv / "bin" / "pip", "install", "-q", str(wheel)], check=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    run = subprocess.run(
        [venv / "bin" / "python", "-c", SCRIPT], cwd=elsewhere, capture_output=True, text=True, timeout=300,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "CAISSON_STATE_DIR": str(tmp_path / "state")},
    )
    assert run.returncode == 0, run.stderr
    hello, tool, helper, location = run.stdout.strip().splitlines()
    assert hello == "hello from agent 0" and tool == "tool ok"
    assert helper == "clone-exec True", "the wheel carries clone-exec's source, compiled on first use"
    assert location.startswith(str(venv)), "the installed package, not the checkout, was used"
    cli = subprocess.run([venv / "bin" / "caisson", "--help"], capture_output=True, text=True, cwd=elsewhere)
    assert cli.returncode == 0 and "demo" in cli.stdout


@pytest.mark.anyio
async def test_runtime_entered_in_one_task_and_exited_in_another(tmp_path: Path) -> None:
    """An embedding program (a web server, a harness) opens in a start-up task and closes in
    a shutdown task; sessions are used from yet other tasks."""
    holder: dict[str, object] = {}

    async def start() -> None:
        rt = Runtime(RuntimeConfig(state_dir=str(tmp_path)))
        await rt.__aenter__()
        holder["rt"] = rt
        holder["session"] = await rt.open_session()

    async def use(i: int) -> None:
        s = holder["session"]
        assert isinstance(s, Session)
        assert (await s.exec(f"echo {i}")).stdout == f"{i}\n"

    async def stop() -> None:
        rt = holder["rt"]
        assert isinstance(rt, Runtime)
        await rt.__aexit__(None, None, None)

    async with anyio.create_task_group() as tg:
        tg.start_soon(start)
    async with anyio.create_task_group() as tg:
        for i in range(5):
            tg.start_soon(use, i)
    async with anyio.create_task_group() as tg:
        tg.start_soon(stop)
    session = holder["session"]
    assert isinstance(session, Session) and session.closed
