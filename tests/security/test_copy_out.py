"""Copy-out as an attacker would try it: what a sandbox produces must land only beneath the
host directory it is copied to.

Two walls, each attacked: the archive is built on the host from the daemon's listing and
reads (no staging file the agent can swap), and the host unpacks it with its own containment
(``caisson``'s ``extract``: no link followed, hostile archives refused whole). Each test
prints tried/landed; landed counts files that appeared outside the destination."""

from __future__ import annotations

import ast
import io
import os
import posixpath
import subprocess
import tarfile
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from caisson import Runtime
from caisson.client import archive, extract
from caisson.errors import OpError

pytestmark = pytest.mark.anyio

REPO = Path(__file__).resolve().parents[2]


def _snapshot(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")} if root.exists() else set()


class Arena:
    """A destination, an 'outside' sibling and a unique absolute path in /tmp: the places an
    attack aims at. ``landed`` counts what appeared outside the destination."""

    def __init__(self, tmp: Path) -> None:
        self.dest = tmp / "dest"
        self.outside = tmp / "outside"
        self.outside.mkdir(parents=True)
        (self.outside / "existing").write_text("host file\n")
        self.abs = Path(f"/tmp/caisson-pwn-{uuid.uuid4().hex}")
        self.abs.mkdir()
        self._before = _snapshot(self.outside)

    def landed(self) -> int:
        changed = len(_snapshot(self.outside) - self._before) + len(_snapshot(self.abs))
        if (self.outside / "existing").read_text() != "host file\n":
            changed += 1
        # A link in the destination that leads out of it counts too (find: paths past PATH_MAX).
        if self.dest.exists():
            links = subprocess.run(["find", ".", "-type", "l", "-printf", "%P\\0%l\\0"], cwd=self.dest,
                                   capture_output=True, check=True).stdout.split(b"\0")
            for rel, target in zip(links[0::2], links[1::2], strict=False):
                resolved = posixpath.normpath(posixpath.join(posixpath.dirname(rel.decode()), target.decode()))
                changed += target.startswith(b"/") or resolved == ".." or resolved.startswith("../")
        return changed

    def close(self) -> None:
        for p in sorted(self.abs.rglob("*"), reverse=True):
            p.unlink() if not p.is_dir() or p.is_symlink() else p.rmdir()
        self.abs.rmdir()


def _tar(build: Callable[[tarfile.TarFile], None]) -> bytes:
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w", format=tarfile.PAX_FORMAT) as tar:
        build(tar)
    return data.getvalue()


def _file(tar: tarfile.TarFile, name: str, payload: bytes = b"pwned\n") -> None:
    info = tarfile.TarInfo(name)
    info.size = len(payload)
    tar.addfile(info, io.BytesIO(payload))


def _link(tar: tarfile.TarFile, name: str, target: str, kind: bytes = tarfile.SYMTYPE) -> None:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    tar.addfile(info)


def _special(tar: tarfile.TarFile, name: str, kind: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.type, info.devmajor, info.devminor = kind, 1, 3
    tar.addfile(info)


def _long_chain(tar: tarfile.TarFile, arena: Arena) -> None:
    """CVE-2025-4517's shape: directories and links whose resolved path passes PATH_MAX, so a
    check by realpath stops early, then a link that climbs out through the chain."""
    step = "d" * 247
    path = ""
    for i in range(16):
        info = tarfile.TarInfo(f"{path}{step}")
        info.type = tarfile.DIRTYPE
        tar.addfile(info)
        _link(tar, f"{path}l{i}", step)
        path += f"l{i}/"
    _link(tar, "escape", path + "../" * 16 + "../outside")
    _file(tar, "escape/pwn")


def hostile_archives(arena: Arena) -> dict[str, bytes]:
    rel_out = "../outside"
    return {
        "absolute name": _tar(lambda t: _file(t, str(arena.abs / "pwn"))),
        "dot-dot name": _tar(lambda t: _file(t, f"{rel_out}/pwn")),
        "dot-dot inside a name": _tar(lambda t: _file(t, "a/../../outside/pwn")),
        "absolute symlink, then a file through it": _tar(
            lambda t: (_link(t, "l", str(arena.abs)), _file(t, "l/pwn"))
        ),
        "relative symlink out, then a file through it": _tar(lambda t: (_link(t, "l", rel_out), _file(t, "l/pwn"))),
        "symlink in, replaced by a symlink out": _tar(
            lambda t: (_link(t, "l", "."), _link(t, "l", rel_out), _file(t, "l/pwn"))
        ),
        "directory, then a symlink of its name": _tar(
            lambda t: (_file(t, "d/ok"), _link(t, "d", rel_out), _file(t, "d/pwn"))
        ),
        "symlink overwritten by a file": _tar(lambda t: (_link(t, "l", rel_out + "/existing"), _file(t, "l"))),
        "symlink chain past PATH_MAX": _tar(lambda t: _long_chain(t, arena)),
        "hard link to a host file": _tar(lambda t: (_link(t, "h", str(arena.outside / "existing"), tarfile.LNKTYPE), _file(t, "h"))),
        "hard link by a relative name": _tar(lambda t: _link(t, "h", rel_out + "/existing", tarfile.LNKTYPE)),
        "character device": _tar(lambda t: _special(t, "null", tarfile.CHRTYPE)),
        "block device": _tar(lambda t: _special(t, "disk", tarfile.BLKTYPE)),
        "FIFO": _tar(lambda t: _special(t, "fifo", tarfile.FIFOTYPE)),
        "NUL in a PAX name": _tar(lambda t: _file(t, "x" * 120 + "\x00/../../outside/pwn")),
        "not a tar": b"\x7fELF" + os.urandom(4000),
    }


def test_hostile_archives_write_nothing(tmp_path: Path) -> None:
    tried = landed = partial = 0
    probe = Arena(tmp_path / "names")
    names = list(hostile_archives(probe))
    probe.close()
    for i, name in enumerate(names):
        arena = Arena(tmp_path / str(i))
        data = hostile_archives(arena)[name]
        tried += 1
        with pytest.raises(OpError) as err:
            extract.extract(io.BytesIO(data), arena.dest)
            pytest.fail(f"{name}: unpacked")
        assert err.value.code == "hostile_archive", (name, err.value)
        landed += arena.landed()
        partial += len(_snapshot(arena.dest))  # refused whole: nothing written at all
        arena.close()
    print(f"hostile archives: tried {tried}, landed {landed}, partly written {partial}")
    assert tried == 16 and landed == 0 and partial == 0


async def test_bombs_are_refused_by_count_and_size(tmp_path: Path) -> None:
    many = _tar(lambda t: [_file(t, f"f{i}", b"") for i in range(1001)])
    with pytest.raises(OpError, match="more than 1000 members"):
        extract.extract(io.BytesIO(many), tmp_path / "a", extract.ExtractLimits(max_members=1000))

    def huge(tar: tarfile.TarFile) -> None:
        info = tarfile.TarInfo("big")
        info.size = 64 * 1024**3  # declared, not sent: refused before a byte is read
        tar.addfile(info)

    header = _tar(huge)
    with pytest.raises(OpError, match="bytes of content"):
        extract.extract(io.BytesIO(header), tmp_path / "b")

    async def endless() -> AsyncIterator[bytes]:
        for _ in range(64):
            yield b"\0" * (1024 * 1024)

    with pytest.raises(OpError, match="over 1048576 bytes"):
        await archive.unpack_to(endless(), tmp_path / "c", extract.ExtractLimits(max_bytes=1024 * 1024, max_members=10))
    assert not any((tmp_path / d).exists() and any((tmp_path / d).iterdir()) for d in ("a", "b", "c"))
    print("bombs: tried 3, landed 0")


def test_a_link_the_host_made_is_not_followed(tmp_path: Path) -> None:
    arena = Arena(tmp_path)
    arena.dest.mkdir()
    (arena.dest / "results").symlink_to(arena.outside)
    with pytest.raises(OpError, match="in the way on the host"):
        extract.extract(io.BytesIO(_tar(lambda t: _file(t, "results/existing"))), arena.dest)
    print(f"host-made link: tried 1, landed {arena.landed() - 1}")  # the host's own link counts once
    assert arena.landed() == 1 and (arena.outside / "existing").read_text() == "host file\n"


WORKSPACE_ATTACK = r"""
set -u
cd /workspace && mkdir -p out/sub && cd out
echo data > sub/file
printf '#!/bin/sh\necho hi\n' > run.sh && chmod 4755 run.sh
ln -s {abs} absolute
ln -s ../../../../../../../../../..{abs} climbing
ln -s /etc/passwd passwd
ln -s sub inside
ln sub/file hardlink
mkfifo fifo
step=$(printf 'd%.0s' $(seq 1 200)); p=.
for i in $(seq 1 24); do mkdir -p "$p/$step"; ln -s "$step" "$p/l$i"; p="$p/l$i"; done
ln -s "$p/$(printf '../%.0s' $(seq 1 30))tmp" chain
"""

RACER = r"""
cd /workspace/out
tar_evil() {{ python3 - "$1" <<'EOF'
import io, sys, tarfile
with tarfile.open(sys.argv[1], "w") as t:
    i = tarfile.TarInfo("{abs}/pwn-staged"); i.size = 3; t.addfile(i, io.BytesIO(b"hi\n"))
EOF
}}
while true; do
  # The old staging file's name, written over and over by the agent.
  for f in /tmp/.caisson-copy-*.tar; do [ -e "$f" ] && tar_evil "$f"; done
  rm -rf race; mkdir race; echo x > race/f
  rm -rf race; ln -s {abs} race
  rm -f race; ln -s ../../../../../../../tmp race
  rm -f swap; echo y > swap; rm -f swap; ln -s {abs}/pwn-swap swap
done
"""


async def attack_copies(arena: Arena, copies: int, copy: Callable[[int], Awaitable[list[str]]]) -> tuple[int, int]:
    """Copies while the agent races; every one must succeed (the race only changes what is
    copied, never where it lands), and each must leave out the links that lead out."""
    for i in range(copies):
        left_out = await copy(i)
        assert {"absolute", "climbing", "passwd", "chain"} <= set(left_out), left_out
    return copies, arena.landed()


@pytest.mark.parametrize("gvisor", [False, True], ids=["runc", "gvisor"])
async def test_racing_agent_and_links_land_nothing(rt: Runtime, tmp_path: Path, gvisor: bool) -> None:
    arena = Arena(tmp_path)
    try:
        async with rt.session(gvisor=gvisor) as s:
            made = await s.exec(WORKSPACE_ATTACK.format(abs=arena.abs), timeout=120)
            assert made.exit_code == 0, made.stderr
            # The same links as root inside the container (an approved dangerous call, or a
            # compromised daemon's user): a root-owned setuid file and a link to the host path.
            root = await s.exec(f"cp /bin/true /workspace/out/suid && chmod 4755 /workspace/out/suid && ln -s {arena.abs} /workspace/out/rootlink", user="root")
            assert root.exit_code == 0, root.stderr
            racer = await s.spawn(RACER.format(abs=arena.abs))
            tried, landed = await attack_copies(arena, 12, lambda i: s.copy_out_to("/workspace/out", arena.dest / str(i)))
            await s.task_signal(racer.task_id)
        copied = arena.dest / "0"
        assert (copied / "sub" / "file").read_text() == "data\n"
        assert os.readlink(copied / "inside") == "sub" and (copied / "hardlink").read_text() == "data\n"
        assert not (copied / "run.sh").stat().st_mode & 0o7000 and not (copied / "suid").stat().st_mode & 0o7000
        assert not any((copied / n).exists() or (copied / n).is_symlink() for n in ("absolute", "climbing", "passwd", "chain", "rootlink", "fifo"))
        print(f"copy_out_to with a racing agent ({'gVisor' if gvisor else 'runc'}): tried {tried}, landed {landed}")
        assert landed == 0
    finally:
        arena.close()


def test_nothing_unpacks_sandbox_data_with_tarfile_or_shutil() -> None:
    """The controller, the remote client and the integrations never extract with ``tarfile``
    or ``shutil``: the one way onto the host is ``extract``."""
    offenders = []
    for path in (REPO / "runtime").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            unpacks = isinstance(node, ast.Attribute) and node.attr in ("extractall", "extract", "unpack_archive")
            if unpacks and not (path.name == "archive.py" and node.attr == "extract"):
                offenders.append(f"{path.relative_to(REPO)}:{node.lineno} {node.attr}")
    assert offenders == []


async def test_session_env_is_not_in_the_daemons_environment(rt: Runtime) -> None:
    secret = uuid.uuid4().hex
    for gvisor in (False, True):
        async with rt.session(gvisor=gvisor, env={"API_TOKEN": secret}) as s:
            seen = await s.exec("echo $API_TOKEN", timeout=30)
            assert seen.stdout.strip() == secret  # the agent's commands get it
            tried = landed = 0
            for user in ("agent", "root"):
                for pid in ("1", "$(pgrep -o -f 'python3 -m sandbox')"):
                    tried += 1
                    r = await s.exec(f"cat /proc/{pid}/environ 2>/dev/null | tr '\\0' '\\n' | grep -c {secret[:12]} || true", user=user, timeout=30)
                    landed += r.stdout.strip() not in ("", "0")
            print(f"session env in the daemon's environment ({'gVisor' if gvisor else 'runc'}): tried {tried}, landed {landed}")
            assert landed == 0
