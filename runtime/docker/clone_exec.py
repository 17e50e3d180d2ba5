"""clone-exec, the sandbox's native clone helper, compiled on this host from sandbox/clone_exec.c.

Linked statically, so it runs in any image of the host's architecture. It is compiled once
per source into the user's cache. Where no C compiler is installed the sandbox goes without
it: its clones then set commands up in Python, slower per command and otherwise the same.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
from importlib import resources
from pathlib import Path

from caisson.logs import get_logger

log = get_logger("caisson.clone_exec")

SOURCE = Path(str(resources.files("caisson._sandbox") / "clone_exec.c"))
# Its name inside the daemon's package, where spawner.py looks for it.
NAME = "clone-exec"
COMPILE_TIMEOUT = 120.0


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "caisson"


@functools.cache
def binary() -> bytes | None:
    """The helper's bytes, compiled now if this source has not been yet; None without a C
    compiler (the reason is logged once)."""
    try:
        source = SOURCE.read_bytes()
    except OSError as exc:
        log.warning("clone-exec's source is missing from the installed package; sandboxes run without it",
                    reason=str(exc))
        return None
    target = _cache_dir() / f"{NAME}-{hashlib.sha256(source).hexdigest()[:16]}"
    if target.is_file():
        return target.read_bytes()
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        log.warning("no C compiler: sandboxes run without clone-exec (slower commands); install gcc to add it")
        return None
    try:
        return _compile(compiler, target)
    except OSError as exc:  # the cache cannot be written, for one
        log.warning("cannot compile clone-exec; sandboxes run without it", reason=str(exc))
        return None


def _compile(compiler: str, target: Path) -> bytes | None:
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        out = Path(tmp) / NAME
        cmd = [compiler, "-O2", "-static", "-s", "-o", str(out), str(SOURCE)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=COMPILE_TIMEOUT)
        except subprocess.TimeoutExpired:
            log.warning("compiling clone-exec took too long; sandboxes run without it", seconds=COMPILE_TIMEOUT)
            return None
        if proc.returncode != 0:
            # Usually the static C library is missing (Debian: libc6-dev).
            log.warning("compiling clone-exec failed; sandboxes run without it", stderr=proc.stderr[-1000:])
            return None
        os.replace(out, target)  # atomic: a concurrent compile of the same source is harmless
    return target.read_bytes()
