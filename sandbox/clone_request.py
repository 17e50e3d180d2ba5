"""The request a clone receives: one format, read by clone_exec.c and by spawner._child alike.

A 4-byte little-endian length, then the payload:

    flags     u8   1 stdin given, 2 Landlock ruleset given, 4 directory descriptor given,
                   8 ids given (else the clone keeps the daemon's), 16 a root to chroot into
    uid, gid, ngroups, argc, npaths, nenv, nfilter   u32 each, little-endian
    groups    u32 * ngroups
    filter    8 bytes * nfilter: a seccomp program to install before the ids change
              (``seccomp``; none when nfilter is 0)
    strings   NUL-terminated: cwd, root (flag 16 only), argv * argc, paths * npaths,
              env * nenv ("NAME=value")

The descriptors travel beside it as SCM_RIGHTS, in this order: stdout, stderr, then
stdin, the ruleset and the directory, each only when its flag is set.
"""

import os
import struct
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

from .errors import DaemonError

LENGTH = struct.Struct("<I")
_HEADER = struct.Struct("<BIIIIIII")
_INSN_SIZE = 8
MAX_FILTER = 4096  # instructions: the kernel's BPF_MAXINSNS
_GROUP = struct.Struct("<I")

HAS_STDIN, HAS_RULESET, HAS_CWD_FD, HAS_IDS, HAS_ROOT = 1, 2, 4, 8, 16
Ids = Tuple[int, int, List[int]]


class Request(NamedTuple):
    argv: List[bytes]
    paths: List[bytes]
    cwd: bytes
    env: List[bytes]
    ids: Optional[Ids]
    flags: int
    filter: bytes
    root: bytes  # empty: the clone keeps the daemon's root


def _plain(value: str) -> bytes:
    raw = os.fsencode(value)
    if b"\0" in raw:
        raise DaemonError("bad_request", "a NUL byte in %r" % value)
    return raw


def encode(
    argv: Sequence[str],
    paths: Sequence[str],
    cwd: str,
    env: Dict[str, str],
    ids: Optional[Ids],
    given: int,
    program: bytes = b"",
    root: str = "",
) -> bytes:
    """The framed request (``given``: the HAS_ flags of the optional descriptors;
    ``program``: a seccomp filter for the command, or none; ``root``: a view to chroot into,
    or none)."""
    uid, gid, groups = ids if ids is not None else (0, 0, [])
    flags = given | (HAS_IDS if ids is not None else 0) | (HAS_ROOT if root else 0)
    strings = [_plain(cwd)] + ([_plain(root)] if root else []) + [_plain(a) for a in argv] + [_plain(p) for p in paths]
    strings += [_plain(k) + b"=" + _plain(v) for k, v in env.items()]
    payload = b"".join(
        [_HEADER.pack(flags, uid, gid, len(groups), len(argv), len(paths), len(env), len(program) // _INSN_SIZE)]
        + [_GROUP.pack(g) for g in groups]
        + [program]
        + [s + b"\0" for s in strings]
    )
    return LENGTH.pack(len(payload)) + payload


def decode(payload: bytes) -> Request:
    """The request in ``payload`` (after the length); ValueError if it is malformed."""
    if len(payload) < _HEADER.size:
        raise ValueError("clone request too short")
    flags, uid, gid, ngroups, argc, npaths, nenv, nfilter = _HEADER.unpack_from(payload)
    at = _HEADER.size + 4 * ngroups
    program = payload[at : at + _INSN_SIZE * nfilter]
    if nfilter > MAX_FILTER or at + _INSN_SIZE * nfilter > len(payload):
        raise ValueError("clone request: groups or filter past its end")
    groups = [_GROUP.unpack_from(payload, _HEADER.size + 4 * i)[0] for i in range(ngroups)]
    at += len(program)
    strings = payload[at:].split(b"\0")
    rooted = 1 if flags & HAS_ROOT else 0
    count = 1 + rooted + argc + npaths + nenv
    if not argc or len(strings) != count + 1 or strings[-1] or (rooted and not strings[1]):
        raise ValueError("clone request: its strings do not match its counts")
    cwd, root, rest = strings[0], strings[1] if rooted else b"", strings[1 + rooted : count]
    ids = (uid, gid, groups) if flags & HAS_IDS else None
    return Request(rest[:argc], rest[argc : argc + npaths], cwd, rest[argc + npaths :], ids, flags, program, root)
