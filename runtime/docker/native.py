"""The sandbox's native helpers, compiled on this host from their C sources in sandbox/.

- clone-exec, the native clone helper: linked statically, so it runs in any image of the
  host's architecture. Without it the sandbox's clones set commands up in Python, slower per
  command and otherwise the same.
- statx-compat.so, preloaded where the kernel refuses statx's AT_NO_AUTOMOUNT (gVisor of late
  2022; see sandbox/statx_compat.py): a shared library needing only libc's ``syscall`` and
  ``errno``. Without it ``ls DIR`` and ``stat`` fail on such kernels.

Each is compiled once per source into the user's cache. Where no C compiler is installed the
sandbox goes without them (the reason is logged once).
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from caisson.logs import get_logger

log = get_logger("caisson.native")

COMPILE_TIMEOUT = 120.0


@dataclass(frozen=True)
class Helper:
    name: str  # its file name in the daemon's package, where the daemon looks for it
    source: Path
    flags: tuple[str, ...]
    mode: int
    without: str  # what a sandbox lacks when it cannot be built


def _source(name: str) -> Path:
    return Path(str(resources.files("caisson._sandbox") / name))


CLONE_EXEC = Helper("clone-exec", _source("clone_exec.c"), ("-O2", "-static", "-s"), 0o755, "slower commands")
STATX_COMPAT = Helper(
    "statx-compat.so", _source("statx_compat.c"), ("-O2", "-shared", "-fPIC", "-s"), 0o644,
    "ls and stat fail under gVisor",
)
HELPERS = (CLONE_EXEC, STATX_COMPAT)


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "caisson"


@functools.cache
def binary(helper: Helper) -> bytes | None:
    """The helper's bytes, compiled now if this source has not been yet; None without a C
    compiler (the reason is logged once)."""
    try:
        source = helper.source.read_bytes()
    except OSError as exc:
        log.warning("a native helper's source is missing from the installed package; sandboxes run without it",
                    helper=helper.name, reason=str(exc), without=helper.without)
        return None
    digest = hashlib.sha256(source + "\0".join(helper.flags).encode()).hexdigest()[:16]
    target = _cache_dir() / f"{helper.name}-{digest}"
    if target.is_file():
        return target.read_bytes()
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        log.warning("no C compiler: sandboxes run without a native helper; install gcc to add it",
                    helper=helper.name, without=helper.without)
        return None
    try:
        return _compile(compiler, helper, target)
    except OSError as exc:  # the cache cannot be written, for one
        log.warning("cannot compile a native helper; sandboxes run without it", helper=helper.name, reason=str(exc))
        return None


def _compile(compiler: str, helper: Helper, target: Path) -> bytes | None:
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        out = Path(tmp) / helper.name
        cmd = [compiler, *helper.flags, "-o", str(out), str(helper.source)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=COMPILE_TIMEOUT)
        except subprocess.TimeoutExpired:
            log.warning("compiling a native helper took too long; sandboxes run without it",
                        helper=helper.name, seconds=COMPILE_TIMEOUT)
            return None
        if proc.returncode != 0:
            # Usually the static C library is missing (Debian: libc6-dev).
            log.warning("compiling a native helper failed; sandboxes run without it",
                        helper=helper.name, stderr=proc.stderr[-1000:], without=helper.without)
            return None
        os.replace(out, target)  # atomic: a concurrent compile of the same source is harmless
    return target.read_bytes()
