"""A throwaway overlay2 Docker engine beside the host's own, for the disk group's cold start:
the hard-limit engine's figure means something only beside overlay2's, measured in the same run.

Everything it uses is its own: a directory under the state directory (data-root, containerd's
root, configuration, trust key, logs), one under /run for what must have a short path (socket
paths stop at 108 bytes: exec-root, the sockets, pidfile, containerd's state), and a containerd
of its own (without ``--containerd``, dockerd uses a system containerd at the default address
where one runs, and two engines would share its namespace). It never reads or changes the host
engine's configuration. The directories and the processes go when the run ends however it
ends: a watcher process, in its own session, holds a pipe from the bench and, when the pipe
closes (the bench done, failed, interrupted or killed outright), stops the engine (SIGTERM,
SIGKILL after a grace) and removes its directories. Only a lost watcher (a reboot) leaves a
directory: the next run removes it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import anyio

from caisson.errors import CaissonError

ENGINES_DIR = "bench-engines"
START_TIMEOUT = 60.0
# dockerd stops running containers at SIGTERM (up to their 10 s stop timeout): room for that.
STOP_GRACE = 30.0
OWNER_FILE = "bench.pid"
RUN_DIR_FILE = "run-dir"
RUN_PARENT = "/run"


class EngineUnavailable(CaissonError):
    """No overlay2 engine can be started here; the message says why and what to do."""


def progress(message: str) -> None:
    print(f"caisson bench: {message}", file=sys.stderr, flush=True)


def engines_root(state_dir: str | Path) -> Path:
    return Path(state_dir) / ENGINES_DIR


@asynccontextmanager
async def throwaway_overlay2(state_dir: str | Path) -> AsyncIterator[str]:
    """Starts an overlay2 engine, yields its address (``unix://...``), and stops and removes it."""
    if os.geteuid() != 0:
        raise EngineUnavailable("starting an overlay2 engine needs root: run the bench as root, or name an overlay2 engine (--overlay2-engine URL)")
    binaries = {name: shutil.which(name) for name in ("dockerd", "containerd", "unshare")}
    missing = [name for name, path in binaries.items() if path is None]
    if missing:
        raise EngineUnavailable(f"{' and '.join(missing)} not installed (e.g. `apt-get install docker.io`), or name an overlay2 engine (--overlay2-engine URL)")
    root = engines_root(state_dir)
    root.mkdir(parents=True, exist_ok=True)
    await anyio.to_thread.run_sync(sweep, root)
    home = Path(tempfile.mkdtemp(prefix="o2-", dir=root))
    (home / OWNER_FILE).write_text(str(os.getpid()))
    started: list[subprocess.Popen[bytes]] = []
    # Started first, in its own session (a Ctrl-C at the terminal must not end it first).
    watcher = subprocess.Popen(
        [sys.executable, "-m", __name__, str(home)], stdin=subprocess.PIPE, start_new_session=True
    )  # fmt: skip
    try:
        run = Path(tempfile.mkdtemp(prefix="caisson-o2-", dir=RUN_PARENT))
        (home / RUN_DIR_FILE).write_text(str(run))
        progress(f"starting a throwaway overlay2 engine in {home}")
        config = _containerd_config(home, run)
        started.append(_spawn(home, "containerd", [str(binaries["containerd"]), "--config", str(config)]))
        await _wait_for(lambda: (run / "containerd.sock").exists(), started[-1], home / "containerd.log")
        # In a network namespace of its own: a dockerd without a bridge deletes the host's
        # docker0 at start (every other engine's bridge network with it).
        dockerd = [str(binaries["unshare"]), "--net", str(binaries["dockerd"]), *_dockerd_args(home, run)]
        started.append(_spawn(home, "dockerd", dockerd))
        await _wait_for(lambda: _answers(run / "docker.sock"), started[-1], home / "dockerd.log")
        yield f"unix://{run / 'docker.sock'}"
    finally:
        with anyio.CancelScope(shield=True):
            progress("stopping the throwaway engine and removing its data")
            await anyio.to_thread.run_sync(_release, watcher, started)
        if watcher.returncode:
            raise CaissonError(f"stopping the throwaway engine in {home} failed (see above): stop it and remove it by hand")


def _containerd_config(home: Path, run: Path) -> Path:
    path = home / "containerd.toml"
    # Version 2 of containerd's configuration; CRI is Kubernetes' plugin, of no use to dockerd.
    path.write_text(
        "version = 2\n"
        f'root = "{home / "containerd-root"}"\n'
        f'state = "{run / "containerd-state"}"\n'
        'disabled_plugins = ["io.containerd.grpc.v1.cri"]\n'
        f'[grpc]\n  address = "{run / "containerd.sock"}"\n'
        f'[ttrpc]\n  address = "{run / "containerd.sock.ttrpc"}"\n'
        '[debug]\n  address = ""\n'
    )
    return path


def _dockerd_args(home: Path, run: Path) -> list[str]:
    # An empty configuration of its own: the default one in /etc/docker is the host engine's.
    # The trust key (a configuration key only, in this Docker) defaults to /etc/docker too.
    config = home / "daemon.json"
    config.write_text(json.dumps({"deprecated-key-path": str(home / "key.json")}))
    return [
        "--config-file", str(config),
        "--data-root", str(home / "data"),
        "--exec-root", str(run / "exec"),
        "--pidfile", str(run / "docker.pid"),
        "-H", f"unix://{run / 'docker.sock'}",
        "--containerd", str(run / "containerd.sock"),
        "--storage-driver", "overlay2",
        "--iptables=false", "--ip6tables=false", "--bridge=none",
    ]  # fmt: skip


def _spawn(home: Path, name: str, argv: list[str]) -> subprocess.Popen[bytes]:
    with open(home / f"{name}.log", "wb") as log:
        # Its own session: a Ctrl-C at the terminal reaches the bench, which stops it in order.
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    (home / f"{name}.pid-started").write_text(str(proc.pid))
    return proc


async def _wait_for(ready: Callable[[], bool], proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while not await anyio.to_thread.run_sync(ready):
        if proc.poll() is not None:
            raise EngineUnavailable(f"{log.stem} exited with {proc.returncode} at start: {_tail(log)}")
        if time.monotonic() > deadline:
            raise EngineUnavailable(f"{log.stem} did not answer within {START_TIMEOUT:.0f} s: {_tail(log)}")
        await anyio.sleep(0.2)


def _answers(sock: Path) -> bool:
    """The Engine API's ``/_ping`` answers OK (the socket exists before the engine serves)."""
    try:
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(5)
            s.connect(str(sock))
            s.sendall(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
            return s.recv(64).startswith(b"HTTP/1.0 200")
    except OSError:
        return False


def _tail(log: Path) -> str:
    try:
        return " | ".join(log.read_text(errors="replace").strip().splitlines()[-3:])[-600:]
    except OSError:
        return "(no log)"


def _release(watcher: subprocess.Popen[bytes], started: list[subprocess.Popen[bytes]]) -> None:
    """Closing the pipe is the watcher's sign to stop the engine; then the exited processes,
    children of the bench, are reaped here."""
    assert watcher.stdin is not None
    watcher.stdin.close()
    watcher.wait()
    for proc in started:
        proc.wait()


def _reap(home: Path) -> None:
    # dockerd first: it stops its containers through containerd.
    for name in ("dockerd", "containerd"):
        pid_file = home / f"{name}.pid-started"
        if _alive(pid_file, str(home)):
            pid = int(pid_file.read_text())
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + STOP_GRACE
            while _alive(pid_file, str(home)) and time.monotonic() < deadline:
                time.sleep(0.1)
            if _alive(pid_file, str(home)):
                os.kill(pid, signal.SIGKILL)
                while _alive(pid_file, str(home)):
                    time.sleep(0.1)
    _remove(home)


def _remove(home: Path) -> None:
    try:
        dirs = [Path((home / RUN_DIR_FILE).read_text()), home]
    except OSError:
        dirs = [home]
    # A killed engine leaves its overlay and shm mounts: unmounted first, deepest first, so
    # that removing a directory never reaches through a mount.
    for mount in sorted(_mounts_under(dirs), key=len, reverse=True):
        subprocess.run(["umount", "--lazy", mount], check=False, capture_output=True)
    for path in dirs:
        shutil.rmtree(path, ignore_errors=True)
        if path.exists():
            raise CaissonError(f"the throwaway engine's directory {path} could not be removed: remove it by hand")


def _mounts_under(dirs: list[Path]) -> list[str]:
    prefixes = tuple(f"{d}/" for d in dirs)
    with open("/proc/self/mountinfo") as f:
        points = [line.split()[4] for line in f]
    # mountinfo escapes spaces as \040; the engine's own paths have none.
    return [p for p in points if p.startswith(prefixes)]


def sweep(root: Path) -> None:
    """Stops and removes the engines of earlier runs whose bench is gone (their watcher lost)."""
    for home in root.glob("o2-*"):
        if _alive(home / OWNER_FILE, ""):
            continue  # another bench's engine, in use
        progress(f"removing a throwaway engine left by an earlier run: {home}")
        _reap(home)


def _alive(pid_file: Path, marker: str) -> bool:
    """The process named in ``pid_file`` runs and its command line holds ``marker`` (a reused
    number belongs to someone else)."""
    try:
        pid = int(pid_file.read_text())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, ValueError, IndexError):
        return False
    return state != "Z" and marker in cmdline


if __name__ == "__main__":
    # The watcher: waits for the bench's end (its pipe closes), then stops and removes the engine.
    sys.stdin.buffer.read()
    _reap(Path(sys.argv[1]))
