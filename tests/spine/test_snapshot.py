"""Snapshots and forks: a session's files carried into new sessions, each fork isolated."""

from __future__ import annotations

from pathlib import Path

import pytest

from caisson import Runtime
from caisson.config import RuntimeConfig
from caisson.docker.images import resolve_base
from caisson.errors import OpError

pytestmark = pytest.mark.anyio


async def test_fork_carries_state_and_forks_are_isolated(tmp_path: Path) -> None:
    async with Runtime(RuntimeConfig(state_dir=str(tmp_path))) as rt:
        async with rt.session() as original:
            await original.write_file("/workspace/state.txt", "before the fork\n")
            await original.call("bash", {"command": "export CARRIED=yes; cd /workspace"})
            forks = await rt.fork(original, 2)
            try:
                a, b = forks
                assert (await a.read_file("/workspace/state.txt")) == b"before the fork\n"
                await a.write_file("/workspace/state.txt", "changed in a\n")
                assert (await b.read_file("/workspace/state.txt")) == b"before the fork\n"
                assert (await original.read_file("/workspace/state.txt")) == b"before the fork\n"
                assert a.container_id != b.container_id != original.container_id
            finally:
                for fork in forks:
                    await fork.close()
        # Only this session's snapshots: other runtimes (a server under test) keep their own.
        of_original = {"label": f"caisson.snapshot_of={original.id}"}
        assert len(rt.backend.client.images.list(name="caisson/snapshot", filters=of_original)) == 1
    # Leaving the runtime removed the snapshots it made.
    async with Runtime(RuntimeConfig(state_dir=str(tmp_path), gc_on_start=False)) as check:
        assert check.backend.client.images.list(name="caisson/snapshot", filters=of_original) == []


async def test_session_snapshot_restores_files_in_a_new_session(rt: Runtime) -> None:
    async with rt.session() as original:
        await original.write_file("/workspace/kept.txt", "kept\n")
        ref = await original.snapshot()
    async with rt.session(from_snapshot=ref) as restored:
        assert await restored.read_file("/workspace/kept.txt") == b"kept\n"
        forks = await restored.fork(1)
        try:
            assert await forks[0].read_file("/workspace/kept.txt") == b"kept\n"
        finally:
            await forks[0].close()


@pytest.mark.parametrize("gvisor", [False, True], ids=["runc", "gvisor"])
async def test_a_session_goes_on_after_its_snapshots(rt: Runtime, gvisor: bool) -> None:
    """The container is paused for each commit: every command after it runs (under gVisor a
    pause interrupted the clones made ahead, and the next command failed "Broken pipe"), a
    background task keeps its output across them, and the snapshot holds the files, those in
    /tmp too (gVisor's own tmpfs over an empty /tmp held them in memory, out of the layer)."""
    async with rt.session(gvisor=gvisor) as s:
        task = await s.spawn("for i in 1 2 3 4 5 6; do echo $i; sleep 0.5; done")
        await s.write_file("/workspace/kept.txt", "kept\n")
        await s.write_file("/tmp/kept.txt", "in tmp\n")
        failed, refs = [], []
        for i in range(3):
            refs.append(await s.snapshot())
            for j in range(3):
                try:
                    res = await s.exec(f"echo {i}-{j}")
                except OpError as exc:
                    failed.append((i, j, str(exc)))
                    continue
                if res.stdout != f"{i}-{j}\n":
                    failed.append((i, j, res.stdout, res.stderr))
        await s.task_wait(task.task_id, timeout=60)
        out = await s.task_read(task.task_id)
    print(f"{'gVisor' if gvisor else 'runc'}: 3 snapshots, 9 commands after them: {len(failed)} failed {failed}")
    assert failed == []
    assert out.exit_code == 0 and out.stdout.split() == ["1", "2", "3", "4", "5", "6"], out
    async with rt.session(from_snapshot=refs[-1], gvisor=gvisor) as restored:
        assert await restored.read_file("/workspace/kept.txt") == b"kept\n"
        assert await restored.read_file("/tmp/kept.txt") == b"in tmp\n"


async def test_a_gvisor_snapshot_keeps_tmp_on_the_layer_after_root_emptied_it(rt: Runtime) -> None:
    """gVisor mounts a tmpfs of its own over an empty /tmp, and the image's marker file keeps
    /tmp from being empty. A command run as root emptied /tmp, marker and all: the snapshot
    puts the marker back, so a session made from it keeps /tmp on its layer (a file written
    there is in the next snapshot) rather than in the sandbox's memory."""
    async with rt.session(gvisor=True) as s:
        emptied = await s.exec("rm -rf /tmp/* /tmp/.[!.]* && ls -A /tmp && echo emptied", user="root")
        assert emptied.stdout == "emptied\n", emptied
        ref = await s.snapshot()
    async with rt.session(from_snapshot=ref, gvisor=True) as restored:
        mounts = (await restored.exec("grep ' /tmp ' /proc/mounts || true")).stdout
        await restored.write_file("/tmp/written.txt", "on the layer\n")
        again = await restored.snapshot()
    async with rt.session(from_snapshot=again, gvisor=True) as later:
        kept = await later.exec("cat /tmp/written.txt")
    print(f"gVisor, /tmp emptied by root before a snapshot: mounts at /tmp after it {mounts.strip() or 'none'}; "
          f"a file written there then is {'kept' if kept.exit_code == 0 else 'lost'} by the next snapshot")
    assert mounts == "" and kept.stdout == "on the layer\n"


async def test_a_gvisor_session_of_an_image_with_an_empty_tmp_keeps_tmp_on_its_layer(rt: Runtime) -> None:
    """An image of the user's own (here the bare Debian base, the daemon copied in) whose /tmp
    is empty: its gVisor container gets the marker before it starts, so /tmp is no tmpfs."""
    base = resolve_base(rt.backend.client)  # type: ignore[attr-defined]
    async with rt.session(image=base, gvisor=True) as s:
        mounts = (await s.exec("grep ' /tmp ' /proc/mounts || true")).stdout
    print(f"gVisor, {base} (an empty /tmp): mounts at /tmp {mounts.strip() or 'none'}")
    assert mounts == ""


async def test_diff_reports_added_modified_and_deleted_files(rt: Runtime) -> None:
    async with rt.session() as base:
        await base.exec(
            "mkdir -p /workspace/pkg/old && printf 'a\\nb\\nc\\n' > /workspace/pkg/mod.py && "
            "echo gone > /workspace/pkg/old/x.txt && echo same > /workspace/touched.txt && "
            "head -c 100 /dev/urandom > /workspace/blob.bin"
        )
        ref = await base.snapshot()
    async with rt.session(from_snapshot=ref) as s:
        assert (await s.diff()).changes == []
        await s.exec(
            "printf 'a\\nB\\nc\\n' > pkg/mod.py && rm -r pkg/old && mkdir -p new && echo hi > new/file.txt && "
            "touch touched.txt && head -c 50 /dev/urandom > blob.bin"
        )
        d = await s.diff()
        summary = {c.path: c.change for c in d.changes}
        assert summary == {
            "pkg/mod.py": "modified",
            "pkg/old/x.txt": "deleted",
            "new/file.txt": "added",
            "blob.bin": "modified",
        }
        by_path = {c.path: c for c in d.changes}
        assert "-b\n+B\n" in by_path["pkg/mod.py"].diff
        assert by_path["blob.bin"].binary and by_path["blob.bin"].diff == ""
        assert (by_path["blob.bin"].old_size, by_path["blob.bin"].new_size) == (100, 50)
        # The patch applies to the snapshot's files and gives the session's.
        patch = d.patch()
    async with rt.session(from_snapshot=ref) as check:
        await check.write_file("/tmp/change.patch", patch)
        applied = await check.exec(["git", "apply", "/tmp/change.patch"])
        assert applied.exit_code == 0, applied.stdout + applied.stderr
        assert await check.read_file("/workspace/pkg/mod.py") == b"a\nB\nc\n"
        assert await check.read_file("/workspace/new/file.txt") == b"hi\n"
        assert (await check.stat("/workspace/pkg/old/x.txt")).exists is False
