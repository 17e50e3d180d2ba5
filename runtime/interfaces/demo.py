"""`caisson demo`: one session, a short scripted sequence, shown as it happens."""

from __future__ import annotations

import time
from collections.abc import Callable

from caisson.runtime import Runtime


async def run_demo(out: Callable[[str], None]) -> None:
    started = time.monotonic()
    async with Runtime() as rt:
        out("starting a sandbox session (hardened container, network none) ...")
        async with rt.session() as s:
            info = s.info
            assert info is not None
            out(
                f"  session {s.id}  container {s.container_id[:12]}  "
                f"daemon {info.version} on Python {info.python}  ripgrep: {'yes' if info.rg else 'no'}  "
                f"ready in {time.monotonic() - started:.2f} s"
            )

            out("\n$ echo hello from $(whoami) in $(pwd); uname -s; exit 3")
            r = await s.exec("echo hello from $(whoami) in $(pwd); uname -s; exit 3", timeout=10)
            out(_indent(r.stdout) + f"  -> exit code {r.exit_code} in {r.duration * 1000:.1f} ms")

            out("\nwrite /workspace/notes/hello.txt, then read it back")
            w = await s.write_file("/workspace/notes/hello.txt", "caisson writes atomically\n")
            data = await s.read_file("/workspace/notes/hello.txt")
            out(f"  wrote {w.size} bytes (sha256 {w.sha256[:12]}...), created={w.created}; read back: {data!r}")

            out("\nbackground task: for i in 1 2 3; do echo tick $i; sleep 0.3; done")
            task = await s.spawn("for i in 1 2 3; do echo tick $i; sleep 0.3; done", name="ticker")
            out(f"  task {task.task_id} (pid {task.pid}) started; reading its output incrementally")
            offset = 0
            while True:
                chunk = await s.task_read(task.task_id, stdout_offset=offset, wait=2.0)
                if chunk.stdout:
                    out(_indent(chunk.stdout).rstrip() + f"   [offset {offset} -> {chunk.stdout_offset}]")
                offset = chunk.stdout_offset
                if not chunk.running and not chunk.stdout:
                    out(f"  task exited with code {chunk.exit_code}")
                    break

            out("\ntool calls cross the permission boundary first (validation, policy, audit):")
            edit = await s.call(
                "edit_file",
                {"path": "/workspace/notes/hello.txt", "old_string": "atomically", "new_string": "atomically, with CAS"},
            )
            out(f"  edit_file -> ok={edit.ok} level={edit.level} decision={edit.decision}")
            out(_indent((edit.data or {}).get("diff", "")).rstrip())
            denied = await s.call("bash", {"command": "rm -rf / --no-preserve-root"})
            out(f"  bash 'rm -rf /' -> ok={denied.ok} decision={denied.decision}: {denied.text}")

            out("\na command that overruns its timeout is killed with its whole process tree:")
            r = await s.exec("echo started; sleep 30", timeout=1)
            out(f"  timed_out={r.timed_out}  partial stdout={r.stdout!r}  after {r.duration:.2f} s")
        out(f"\nsession closed and its container removed; total {time.monotonic() - started:.2f} s")


def _indent(text: str) -> str:
    return "".join(f"  | {line}\n" for line in text.splitlines())
