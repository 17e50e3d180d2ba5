"""File-system ops of the daemon."""

import hashlib
import os
import resource
import stat
import time
from pathlib import Path

import pytest
from daemon_client import Client, start_daemon


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def leftovers(directory: Path) -> list:
    return sorted(p.name for p in directory.iterdir() if "caisson" in p.name)


# ---------------------------------------------------------------- ping / stat / read


def test_ping(daemon: Client) -> None:
    result, _ = daemon.call("ping")
    assert result["version"] == "0.1.0"
    assert result["protocol"] == 1
    assert result["python"].count(".") == 2
    assert result["pid"] == daemon.proc.pid
    assert result["uid"] == os.getuid()
    assert "rg" in result


def test_stat(daemon: Client, ws: Path) -> None:
    (ws / "f").write_bytes(b"12345")
    (ws / "d").mkdir()
    os.symlink("f", ws / "link")
    os.symlink("nowhere", ws / "dangling")

    result, _ = daemon.call("stat", path=str(ws / "f"))
    assert result["exists"] and result["type"] == "file" and result["size"] == 5
    assert stat.S_ISREG(result["mode"]) and result["target"] is None
    assert result["realpath"] == str(ws / "f")
    assert daemon.call("stat", path=str(ws / "d"))[0]["type"] == "dir"

    followed, _ = daemon.call("stat", path=str(ws / "link"))
    assert followed["type"] == "file" and followed["target"] == "f" and followed["realpath"] == str(ws / "f")
    unfollowed, _ = daemon.call("stat", path=str(ws / "link"), follow=False)
    assert unfollowed["type"] == "symlink" and unfollowed["target"] == "f"

    assert daemon.call("stat", path=str(ws / "missing"))[0] == {"exists": False}
    assert daemon.call("stat", path=str(ws / "f" / "below"))[0] == {"exists": False}
    # A dangling link: missing, and where the link itself is.
    assert daemon.call("stat", path=str(ws / "dangling"))[0] == {"exists": False, "entry": str(ws / "dangling")}
    assert daemon.call("stat", path=str(ws / "dangling"), follow=False)[0]["type"] == "symlink"


def test_stat_reads_the_head_of_the_file_it_names(daemon: Client, ws: Path) -> None:
    data = bytes(range(256)) * 40
    (ws / "f").write_bytes(data)
    os.symlink("f", ws / "link")
    (ws / "d").mkdir()
    whole, blob = daemon.call("stat", path=str(ws / "link"), read=len(data))
    assert blob == data and whole["read_eof"] is True and whole["realpath"] == str(ws / "f")
    assert whole["sha256"] == hashlib.sha256(data).hexdigest()
    head, blob = daemon.call("stat", path=str(ws / "f"), read=100)
    assert blob == data[:100] and head["read_eof"] is False and "sha256" not in head
    # Nothing to read: a directory, an unfollowed link, and a read of nothing.
    for args in ({"path": str(ws / "d")}, {"path": str(ws / "link"), "follow": False}, {"path": str(ws / "f"), "read": 0}):
        result, blob = daemon.call("stat", **{"read": 10, **args})
        assert blob == b"" and "read_eof" not in result


def test_stat_nearest_names_where_a_new_path_would_be(daemon: Client, ws: Path) -> None:
    (ws / "real").mkdir()
    os.symlink("real", ws / "via")
    result, _ = daemon.call("stat", path=str(ws / "via" / "new" / "file"), nearest=True)
    assert result == {"exists": False, "nearest": str(ws / "real" / "new" / "file")}
    result, _ = daemon.call("stat", path=str(ws / "dangling-new"), nearest=True)
    assert result["nearest"] == str(ws / "dangling-new")
    # A dangling link is followed, as a write would follow it, to where the write would land.
    os.symlink("real/made-by-a-write", ws / "dangling-link")
    result, _ = daemon.call("stat", path=str(ws / "dangling-link"), nearest=True)
    assert result == {"exists": False, "nearest": str(ws / "real" / "made-by-a-write"), "entry": str(ws / "dangling-link")}
    assert daemon.call("stat", path=str(ws / "missing"))[0] == {"exists": False}  # only when asked


def test_read(daemon: Client, ws: Path) -> None:
    data = bytes(range(256)) * 40
    (ws / "f").write_bytes(data)
    path = str(ws / "f")

    result, blob = daemon.call("read", path=path, hash=True)
    assert blob == data
    assert result == {"size": len(data), "offset": 0, "eof": True, "sha256": sha(data)}

    result, blob = daemon.call("read", path=path, offset=100, length=50, hash=True)
    assert blob == data[100:150] and result["eof"] is False and result["sha256"] == sha(data)
    result, blob = daemon.call("read", path=path, offset=len(data) - 10, length=50)
    assert blob == data[-10:] and result["eof"] is True
    result, blob = daemon.call("read", path=path, offset=len(data) + 5)
    assert blob == b"" and result["eof"] is True

    assert daemon.error("read", path=path, max_bytes=100).code == "too_large"
    assert daemon.call("read", path=path, length=100, max_bytes=100)[1] == data[:100]
    assert daemon.error("read", path=str(ws)).code == "is_a_directory"
    assert daemon.error("read", path=str(ws / "missing")).code == "not_found"
    assert daemon.error("read", path="relative/path").code == "bad_request"


def test_read_proc_file_with_zero_size(daemon: Client) -> None:
    result, blob = daemon.call("read", path="/proc/self/status")
    assert b"Pid:" in blob and result["eof"] is True and result["size"] == len(blob)


# ---------------------------------------------------------------- write


def test_write_create_and_overwrite(daemon: Client, ws: Path) -> None:
    path = ws / "a" / "b" / "new.txt"
    result, _ = daemon.call("write", b"hello", path=str(path))
    assert result == {"created": True, "size": 5, "sha256": sha(b"hello")}
    assert path.read_bytes() == b"hello"
    assert stat.S_IMODE(path.stat().st_mode) == 0o644

    os.chmod(path, 0o600)
    result, _ = daemon.call("write", b"bye", path=str(path), mode=0o777)
    assert result["created"] is False and path.read_bytes() == b"bye"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # an existing file keeps its mode

    result, _ = daemon.call("write", b"x", path=str(ws / "exec.sh"), mode=0o755)
    assert stat.S_IMODE((ws / "exec.sh").stat().st_mode) == 0o755
    assert daemon.error("write", b"x", path=str(ws / "no" / "dir" / "f"), parents=False).code == "not_found"
    assert daemon.error("write", b"x", path=str(ws)).code == "is_a_directory"
    assert leftovers(ws) == [] and leftovers(path.parent) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")
def test_write_owner(daemon: Client, ws: Path) -> None:
    path = ws / "sub" / "owned"
    daemon.call("write", b"x", path=str(path), owner=1000)
    assert (path.stat().st_uid, path.stat().st_gid) == (1000, 1000)
    assert path.parent.stat().st_uid == 1000  # parents it created belong to the owner too

    other = ws / "other"
    other.write_bytes(b"old")
    os.chown(other, 1234, 1234)
    daemon.call("write", b"new", path=str(other))
    assert (other.stat().st_uid, other.stat().st_gid) == (1234, 1234)  # kept


def test_write_through_symlink_keeps_link(daemon: Client, ws: Path) -> None:
    (ws / "real").write_bytes(b"old")
    os.symlink("real", ws / "link")
    daemon.call("write", b"new", path=str(ws / "link"))
    assert os.readlink(ws / "link") == "real"
    assert (ws / "real").read_bytes() == b"new"


def test_decided_paths_reach_only_what_was_decided(daemon: Client, ws: Path) -> None:
    """A path bound to the real paths the host decided on is refused (conflict, nothing done)
    once a link on its way leads elsewhere; through the link the host saw, it works."""
    (ws / "real").mkdir()
    (ws / "guarded").mkdir()
    (ws / "guarded" / "f").write_bytes(b"guarded")
    os.symlink("real", ws / "via")
    path = str(ws / "via" / "f")
    decided = {path: [str(ws / "real" / "f")]}
    daemon.call("write", b"one", path=path, decided=decided)
    assert (ws / "real" / "f").read_bytes() == b"one"
    os.remove(ws / "via")
    os.symlink("guarded", ws / "via")  # swapped after the decision
    for op, blob, args in (
        ("write", b"two", {}), ("read", b"", {}), ("stat", b"", {}), ("remove", b"", {}),
        ("rename", b"", {"src": path, "dst": str(ws / "moved")}),
    ):
        call = {"path": path, **args} if op != "rename" else args
        error = daemon.error(op, blob, decided=decided, **call)
        assert error.code == "conflict" and "changed while the call ran" in error.message, (op, error)
    assert (ws / "guarded" / "f").read_bytes() == b"guarded" and not (ws / "moved").exists()
    # A link at the end: the link itself is reached by ops on the link, its target by the rest.
    os.symlink("real/f", ws / "lnk")
    both = {str(ws / "lnk"): [str(ws / "real" / "f"), str(ws / "lnk")]}
    assert daemon.call("read", path=str(ws / "lnk"), decided=both)[1] == b"one"
    daemon.call("remove", path=str(ws / "lnk"), decided=both)
    assert not (ws / "lnk").is_symlink() and (ws / "real" / "f").exists()


def test_write_compare_and_swap(daemon: Client, ws: Path) -> None:
    path = str(ws / "f")
    daemon.call("write", b"v1", path=path, expected_sha256="")
    assert daemon.error("write", b"v1", path=path, expected_sha256="").code == "conflict"
    assert daemon.error("write", b"v2", path=path, expected_sha256=sha(b"other")).code == "conflict"
    assert daemon.error("write", b"v2", path=str(ws / "nope"), expected_sha256=sha(b"v1")).code == "conflict"
    assert daemon.error("write", b"v2", path=path, expected_sha256="XYZ").code == "bad_request"
    result, _ = daemon.call("write", b"v2", path=path, expected_sha256=sha(b"v1"))
    assert result["sha256"] == sha(b"v2") and (ws / "f").read_bytes() == b"v2"
    assert leftovers(ws) == []


def test_concurrent_cas_writes_have_one_winner(daemon: Client, ws: Path) -> None:
    path = str(ws / "f")
    daemon.call("write", b"base", path=path)
    payload = b"x" * 200000
    ids = [daemon.send("write", payload + bytes([i]), path=path, expected_sha256=sha(b"base")) for i in range(20)]
    outcomes = [daemon.recv(i)[0] for i in ids]
    winners = [o for o in outcomes if o["ok"]]
    assert len(winners) == 1
    assert all(o["error"]["code"] == "conflict" for o in outcomes if not o["ok"])
    assert sha((ws / "f").read_bytes()) == winners[0]["result"]["sha256"]
    assert leftovers(ws) == []


def test_chunked_upload(daemon: Client, ws: Path) -> None:
    path = str(ws / "up" / "big.bin")
    chunks = [os.urandom(100000), os.urandom(50000), os.urandom(7)]
    r1, _ = daemon.call("write", chunks[0], path=path, upload="u1", final=False)
    assert r1 == {"created": False, "size": 100000, "sha256": sha(chunks[0])}
    assert not os.path.exists(path)
    assert len(leftovers(ws / "up")) == 1  # the staging file, next to the target
    daemon.call("write", chunks[1], path=path, upload="u1", final=False)
    assert daemon.error("write", b"", path=str(ws / "elsewhere"), upload="u1", final=False).code == "bad_request"
    result, _ = daemon.call("write", chunks[2], path=path, upload="u1", final=True, expected_sha256="", mode=0o600)
    whole = b"".join(chunks)
    assert result == {"created": True, "size": len(whole), "sha256": sha(whole)}
    assert Path(path).read_bytes() == whole
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert leftovers(ws / "up") == []


def test_chunked_upload_conflict_leaves_nothing(daemon: Client, ws: Path) -> None:
    path = str(ws / "f")
    daemon.call("write", b"current", path=path)
    daemon.call("write", b"part1", path=path, upload="u2", final=False)
    assert len(leftovers(ws)) == 1
    err = daemon.error("write", b"part2", path=path, upload="u2", final=True, expected_sha256=sha(b"stale"))
    assert err.code == "conflict"
    assert leftovers(ws) == [] and (ws / "f").read_bytes() == b"current"
    # The failed upload is gone: a new chunk with the same id starts afresh.
    daemon.call("write", b"fresh", path=path, upload="u2", final=True)
    assert (ws / "f").read_bytes() == b"fresh"


def _limit_file_size() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))


def test_failed_write_leaves_no_temp_file(tmp_path: Path) -> None:
    # A daemon whose files may not exceed 1 MiB: writing 2 MiB fails half-way (EFBIG).
    client = start_daemon(tmp_path, preexec_fn=_limit_file_size)
    try:
        client.call("ping")
        ws = client.workspace
        (ws / "f").write_bytes(b"original")
        err = client.error("write", b"y" * (2 << 20), path=str(ws / "f"))
        assert err.code == "io_error"
        assert (ws / "f").read_bytes() == b"original"
        err = client.error("write", b"y" * (2 << 20), path=str(ws / "new"), upload="u", final=False)
        assert err.code == "io_error"
        assert sorted(p.name for p in ws.iterdir()) == ["f"]
    finally:
        assert client.close() == 0


def test_upload_staging_removed_at_exit(tmp_path: Path) -> None:
    client = start_daemon(tmp_path)
    client.call("ping")
    client.call("write", b"part", path=str(client.workspace / "f"), upload="u", final=False)
    assert len(leftovers(client.workspace)) == 1
    assert client.close() == 0
    assert leftovers(client.workspace) == []


# ---------------------------------------------------------------- list / walk


def test_list(daemon: Client, ws: Path) -> None:
    (ws / "f").write_bytes(b"abc")
    (ws / "d").mkdir()
    os.symlink("f", ws / "l")
    result, _ = daemon.call("list", path=str(ws))
    entries = {e["name"]: e for e in result["entries"]}
    assert set(entries) == {"f", "d", "l"}
    assert entries["f"]["type"] == "file" and entries["f"]["size"] == 3
    assert entries["d"]["type"] == "dir"
    assert entries["l"]["type"] == "symlink" and entries["l"]["target"] == "f"
    assert set(entries["f"]) == {"name", "type", "size", "mode", "mtime", "uid", "gid", "nlink", "target"}
    assert daemon.error("list", path=str(ws / "f")).code == "not_a_directory"
    assert daemon.error("list", path=str(ws / "missing")).code == "not_found"


def test_walk(daemon: Client, ws: Path) -> None:
    (ws / "src" / "pkg").mkdir(parents=True)
    (ws / "src" / "pkg" / "mod.py").write_bytes(b"x = 1\n")
    (ws / "src" / ".gitignore").write_bytes(b"*.log\n")
    (ws / "src" / ".ignore").write_bytes(b"build/\n")
    (ws / ".gitignore").write_bytes(b"/dist\n")
    (ws / ".git").mkdir()
    (ws / ".git" / "HEAD").write_bytes(b"ref\n")
    (ws / "top.txt").write_bytes(b"12")
    (ws / "outside").mkdir()
    (ws / "outside" / "secret").write_bytes(b"s")
    os.symlink(str(ws / "outside"), ws / "src" / "linkdir")

    result, _ = daemon.call("walk", path=str(ws), ignore_files=[".gitignore", ".ignore"])
    paths = {e["path"]: e for e in result["entries"]}
    assert set(paths) == {"src", "src/pkg", "src/pkg/mod.py", "src/linkdir", "top.txt", "outside", "outside/secret"}
    assert paths["src/linkdir"]["type"] == "symlink"  # listed, not followed
    assert paths["top.txt"]["size"] == 2 and paths["src"]["type"] == "dir"
    assert result["ignore"] == {"": "/dist\n", "src": "*.log\n\nbuild/\n"}
    assert result["truncated"] is False

    hidden, _ = daemon.call("walk", path=str(ws), include_hidden=True)
    assert {".git", ".git/HEAD", ".gitignore", "src/.gitignore", "src/.ignore"} <= {e["path"] for e in hidden["entries"]}

    limited, _ = daemon.call("walk", path=str(ws), max_entries=3)
    assert len(limited["entries"]) == 3 and limited["truncated"] is True
    assert daemon.error("walk", path=str(ws / "top.txt")).code == "not_a_directory"
    assert daemon.error("walk", path=str(ws / "missing")).code == "not_found"


def test_walk_20000_files(daemon: Client, ws: Path) -> None:
    for d in range(100):
        sub = ws / f"d{d:03d}"
        sub.mkdir()
        for f in range(200):
            os.close(os.open(str(sub / f"f{f:03d}.txt"), os.O_CREAT | os.O_WRONLY, 0o644))
    started = time.monotonic()
    result, _ = daemon.call("walk", path=str(ws))
    elapsed = time.monotonic() - started
    assert len(result["entries"]) == 20100 and not result["truncated"]
    assert elapsed < 15.0, elapsed  # about 1 s on a quiet machine


# ---------------------------------------------------------------- mkdir / remove / rename


def test_mkdir(daemon: Client, ws: Path) -> None:
    assert daemon.call("mkdir", path=str(ws / "a" / "b" / "c"), mode=0o700)[0] == {"created": True}
    assert stat.S_IMODE((ws / "a" / "b" / "c").stat().st_mode) == 0o700
    assert stat.S_IMODE((ws / "a").stat().st_mode) == 0o755
    assert daemon.call("mkdir", path=str(ws / "a"))[0] == {"created": False}
    assert daemon.error("mkdir", path=str(ws / "a"), exist_ok=False).code == "exists"
    assert daemon.error("mkdir", path=str(ws / "x" / "y"), parents=False).code == "not_found"
    (ws / "file").touch()
    assert daemon.error("mkdir", path=str(ws / "file")).code == "exists"
    if os.geteuid() == 0:
        daemon.call("mkdir", path=str(ws / "o1" / "o2"), owner=1000)
        assert (ws / "o1").stat().st_uid == 1000 and (ws / "o1" / "o2").stat().st_uid == 1000


def test_plain_mkdir_makes_nothing_through_a_link(daemon: Client, ws: Path) -> None:
    (ws / "guarded").mkdir()
    os.symlink(str(ws / "guarded"), ws / "parent-link")
    os.symlink("guarded", ws / "dir-link")
    os.symlink(str(ws / "guarded" / "new"), ws / "dangling")
    for path in ("parent-link/a", "parent-link/a/b", "dir-link", "dangling"):
        assert daemon.error("mkdir", path=str(ws / path), plain=True).code == "not_plain", path
    assert list((ws / "guarded").iterdir()) == []
    # Without links it is mkdir -p, and exist_ok still holds.
    assert daemon.call("mkdir", path=str(ws / "p" / "q"), plain=True)[0] == {"created": True}
    assert daemon.call("mkdir", path=str(ws / "p" / "q"), plain=True)[0] == {"created": False}
    assert daemon.error("mkdir", path=str(ws / "p" / "q"), plain=True, exist_ok=False).code == "exists"


def test_remove(daemon: Client, ws: Path) -> None:
    (ws / "f").touch()
    (ws / "d" / "e").mkdir(parents=True)
    (ws / "d" / "e" / "g").touch()
    (ws / "target").mkdir()
    (ws / "target" / "keep").touch()
    os.symlink(str(ws / "target"), ws / "link")

    assert daemon.call("remove", path=str(ws / "f"))[0] == {"removed": True}
    assert not (ws / "f").exists()
    assert daemon.error("remove", path=str(ws / "f")).code == "not_found"
    assert daemon.call("remove", path=str(ws / "f"), missing_ok=True)[0] == {"removed": False}
    assert daemon.error("remove", path=str(ws / "d")).code == "io_error"
    daemon.call("remove", path=str(ws / "d"), recursive=True)
    assert not (ws / "d").exists()
    daemon.call("remove", path=str(ws / "link"), recursive=True)
    assert not os.path.lexists(ws / "link") and (ws / "target" / "keep").exists()


def test_rename(daemon: Client, ws: Path) -> None:
    (ws / "a").write_bytes(b"a")
    (ws / "b").write_bytes(b"b")
    assert daemon.error("rename", src=str(ws / "a"), dst=str(ws / "b"), overwrite=False).code == "exists"
    assert (ws / "a").read_bytes() == b"a" and (ws / "b").read_bytes() == b"b"
    daemon.call("rename", src=str(ws / "a"), dst=str(ws / "c"), overwrite=False)
    assert (ws / "c").read_bytes() == b"a" and not (ws / "a").exists()
    daemon.call("rename", src=str(ws / "c"), dst=str(ws / "b"))
    assert (ws / "b").read_bytes() == b"a"
    assert daemon.error("rename", src=str(ws / "zzz"), dst=str(ws / "y")).code == "not_found"


def test_plain_remove_and_rename_change_nothing_through_a_link(daemon: Client, ws: Path) -> None:
    (ws / "guarded").mkdir()
    (ws / "guarded" / "keep").write_bytes(b"k")
    (ws / "mine").write_bytes(b"m")
    os.symlink(str(ws / "guarded"), ws / "parent-link")
    os.symlink("guarded/keep", ws / "file-link")
    assert daemon.error("remove", path=str(ws / "parent-link" / "keep"), plain=True).code == "not_plain"
    for src, dst in (("mine", "parent-link/new"), ("parent-link/keep", "moved")):
        assert daemon.error("rename", src=str(ws / src), dst=str(ws / dst), plain=True).code == "not_plain", (src, dst)
    assert sorted(p.name for p in (ws / "guarded").iterdir()) == ["keep"] and (ws / "mine").exists()
    # A link at the end is the entry itself, as without plain: renamed or removed, never followed.
    daemon.call("rename", src=str(ws / "file-link"), dst=str(ws / "renamed-link"), plain=True)
    assert daemon.call("remove", path=str(ws / "renamed-link"), plain=True)[0] == {"removed": True}
    assert (ws / "guarded" / "keep").read_bytes() == b"k"


def test_undecodable_file_name(daemon: Client, ws: Path) -> None:
    os.close(os.open(os.path.join(os.fsencode(ws), b"bad\xffname"), os.O_CREAT | os.O_WRONLY))
    result, _ = daemon.call("list", path=str(ws))
    assert [e["name"] for e in result["entries"]] == ["bad\ufffdname"]


def test_concurrent_writes_to_different_files(daemon: Client, ws: Path) -> None:
    ids = [daemon.send("write", b"%d" % i, path=str(ws / f"f{i}")) for i in range(30)]
    for i in ids:
        daemon.result(i)
    assert sorted(p.name for p in ws.iterdir()) == sorted(f"f{i}" for i in range(30))
