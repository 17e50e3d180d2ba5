"""A controller killed (SIGKILL) while its snapshot holds a session paused with its sparse files
emptied (runtime/docker/sparse.py) costs the agent nothing: whatever next looks at the container
(a fresh runtime's re-attach, or its reaper when it opens) clones the files back into the same
inodes, resumes the container, and leaves no store, marker or half-made snapshot behind; a
session closed instead takes them with its container.

The controller runs in a subprocess that re-attaches the session and snapshots it; a wrapper
around one step of the snapshot prints where it is and waits there, so each kill lands at a
known moment: right after the pause, with the files emptied, after the commit, and halfway
through the clone back.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from caisson import Runtime, RuntimeConfig, Session
from caisson.docker import containers, sparse

pytestmark = pytest.mark.anyio

MiB = 2**20
# Three sparse files, each with 64 KiB of data of its own at known offsets.
FILES = {"big": (512 * MiB, (0, 100 * MiB, 511 * MiB)), "mid": (64 * MiB, (32 * MiB,)), "deep/er/small": (48 * MiB, (47 * MiB,))}
WRITE = f"""
import os, hashlib
for name, (size, offsets) in {FILES!r}.items():
    path = os.path.join("/workspace", name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.truncate(size)
        for at in offsets:
            f.seek(at)
            f.write(hashlib.sha256(("%s@%d" % (name, at)).encode()).digest() * 2048)
"""
# What the agent sees: each file's size and the digest of each data region.
CHECK = f"""
import os, hashlib
for name, (size, offsets) in sorted({FILES!r}.items()):
    path = os.path.join("/workspace", name)
    with open(path, "rb") as f:
        regions = []
        for at in offsets:
            f.seek(at)
            regions.append(hashlib.sha256(f.read(65536)).hexdigest()[:16])
    print(name, os.stat(path).st_size, *regions)
"""
# The controller: re-attach the session, snapshot it, and wait at the named step.
CONTROLLER = """
import sys, time, anyio
from caisson import Runtime, RuntimeConfig
from caisson.docker import containers, sparse

session_id, stop_at, state_dir, docker_host = sys.argv[1:5]

def hold():
    print(stop_at, flush=True)
    time.sleep(3600)

def before(module, name, when=stop_at):
    original = getattr(module, name)
    def wrapped(*args, **kwargs):
        if stop_at == when:
            hold()
        return original(*args, **kwargs)
    setattr(module, name, wrapped)

before(sparse, "stash", "paused")
before(containers, "snapshot", "emptied")
before(sparse, "put_back", "committed")
if stop_at == "restoring":  # after the first file is cloned back, the others still empty
    put_back, clone = sparse.put_back, sparse._clone
    restoring = []
    def put_back_marked(*args):
        restoring.append(True)
        return put_back(*args)
    def clone_then_hold(src, dst):
        clone(src, dst)
        if restoring:
            hold()
    sparse.put_back, sparse._clone = put_back_marked, clone_then_hold

async def main():
    async with Runtime(RuntimeConfig(state_dir=state_dir, docker_host=docker_host or None, gc_on_start=False)) as rt:
        s = await rt.reattach(session_id)
        await rt.snapshot(s)
        print("finished", flush=True)

anyio.run(main)
"""
# Where to kill, and who finds the container afterwards.
KILLS = [
    ("paused", "reattach"), ("emptied", "reaper"), ("committed", "reattach"), ("restoring", "reaper"),
    ("emptied", "snapshot"),
]


def _controller_at(session_id: str, stop_at: str, state_dir: str, docker_host: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", CONTROLLER, session_id, stop_at, state_dir, docker_host],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if line != stop_at:
        proc.kill()
        raise AssertionError(f"the controller did not reach {stop_at}: {line!r} {proc.communicate()[1][-2000:]}")
    return proc


def _leftovers(root: Path, session: Session) -> list[str]:
    """What of this session's snapshots is left on the engine: stores, markers, images."""
    stores = root / sparse.STORE
    left = [p.name for p in stores.iterdir() if p.name.startswith(session.id)] if stores.is_dir() else []
    if sparse.marker_path(root, session.container_id).exists():
        left.append("unfinished marker")
    return left


async def test_a_controller_killed_mid_snapshot_loses_no_file(rt: Runtime, tmp_path: Path) -> None:
    await killed_mid_snapshot(rt, tmp_path)


async def killed_mid_snapshot(rt: Runtime, tmp_path: Path) -> None:
    """Kills at each step of a snapshot, the container found afterwards by each finder (also
    run on overlay2 by ``test_snapshot_overlay2``)."""
    client = rt.backend.client  # type: ignore[attr-defined]
    root = sparse.engine_root(client)
    assert root is not None, "this test needs a local btrfs or overlay2 engine"
    host = rt.config.docker_host or ""
    driver = client.info()["Driver"]
    async with rt.session() as s:
        await s.write_file("/workspace/.write.py", WRITE.encode())
        await s.write_file("/workspace/.check.py", CHECK.encode())
        made = await s.exec("python3 /workspace/.write.py", timeout=60)
        assert made.exit_code == 0, made
        expected = (await s.exec("python3 /workspace/.check.py", timeout=60)).stdout
        top = sparse.layer(root, s.container_id)
        assert top is not None
        tried = landed = 0
        for stop_at, finder in KILLS:
            proc = await anyio.to_thread.run_sync(_controller_at, s.id, stop_at, str(tmp_path), host)
            state = client.api.inspect_container(s.container_id)["State"]
            emptied = sum((top / "workspace" / name).stat().st_size == 0 for name in FILES)
            proc.send_signal(signal.SIGKILL)
            await anyio.to_thread.run_sync(proc.wait)
            assert state["Paused"], f"killed at {stop_at}, the container was not paused"
            # Else the kill would prove nothing: the files are empty in the paused session.
            want = {"paused": 0, "emptied": len(FILES), "committed": len(FILES), "restoring": len(FILES) - 1}
            assert emptied == want[stop_at], f"killed at {stop_at}, {emptied} files were empty"
            # A fresh controller: its re-attach, or its reaper as it opens, finds the container.
            fresh = RuntimeConfig(state_dir=str(tmp_path), docker_host=host or None, gc_on_start=finder == "reaper")
            async with Runtime(fresh) as rt2:
                running = client.api.inspect_container(s.container_id)["State"]["Status"]
                if finder == "snapshot":  # another snapshot of it undoes the stash, then is taken
                    await rt2.backend.remove_snapshot(await rt2.backend.snapshot(s.container_id, s.id, "test", 60))
                again = await rt2.reattach(s.id)
                seen = (await again.exec("python3 /workspace/.check.py", timeout=60)).stdout
                await again.detach()
            left = _leftovers(root, s)
            images = client.api.images(name=containers.SNAPSHOT_REPO, filters={"label": f"caisson.snapshot_of={s.id}"})
            tried += 1
            lost = seen != expected or bool(left) or bool(images)
            landed += lost
            print(f"{driver}: killed at {stop_at}, found by the {finder}: container {running} once it opened; files "
                  f"{'intact' if seen == expected else 'LOST: ' + seen}; leftovers {left or 'none'}, "
                  f"half-made snapshots {len(images)}")
            assert seen == expected, (stop_at, seen, expected)
            assert not left and not images, (stop_at, left, images)
            if finder == "reaper":
                assert running == "running", "the reaper did not resume the container"
        # Paused with no snapshot under way (by hand): a re-attach resumes it.
        client.api.pause(s.container_id)
        final = await rt.reattach(s.id)
        assert client.api.inspect_container(s.container_id)["State"]["Status"] == "running"
        # A snapshot now completes, and both the session and one opened from it hold the files.
        ref = await rt.snapshot(final)
        async with rt.session(image=ref) as restored:
            from_snapshot = (await restored.exec("python3 /workspace/.check.py", timeout=60)).stdout
        assert (await final.exec("python3 /workspace/.check.py", timeout=60)).stdout == expected
        # Killed once more, and the session closed: what the snapshot left goes with its container.
        proc = await anyio.to_thread.run_sync(_controller_at, s.id, "committed", str(tmp_path), host)
        proc.send_signal(signal.SIGKILL)
        await anyio.to_thread.run_sync(proc.wait)
        await final.close()
        left = [name for name in _leftovers(root, s) if f"{containers.SNAPSHOT_REPO}:{name}" != ref]  # ref's is kept
        images = client.api.images(name=containers.SNAPSHOT_REPO, filters={"label": f"caisson.snapshot_of={s.id}"})
        print(f"killed after the commit, then closed: leftovers {left or 'none'}, snapshots {len(images)}")
        assert not left and [i["RepoTags"] for i in images] == [[ref]], (left, images)
    print(f"{driver}: controller killed mid-snapshot: tried {tried}, landed {landed} (files lost or leftovers)")
    assert landed == 0
    assert from_snapshot == expected
    assert not os.path.exists(sparse.marker_path(root, s.container_id))
