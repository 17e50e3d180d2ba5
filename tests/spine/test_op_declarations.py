"""The daemon's op declarations (``sandbox/opspec.py``) hold on a real session: a request the
declaration does not allow is refused whole, with the declaration's own error, before any of
it runs (a misspelled ``confine`` or ``as_user`` must not run the request unconfined), the
client refuses the same requests unsent, and every op's reply carries only declared fields."""

from __future__ import annotations

import math
from typing import Any

import anyio
import pytest

from caisson import Session
from caisson._sandbox import opspec
from caisson._sandbox.errors import DaemonError
from caisson.errors import OpError

pytestmark = pytest.mark.anyio

SAFE = {"level": "safe"}


def expected_refusal(op: str, args: dict[str, Any]) -> str:
    with pytest.raises(DaemonError) as err:
        opspec.check(op, args)
    return err.value.message


def attacks(mark: str) -> list[tuple[str, dict[str, Any], bytes]]:
    """Requests whose every variant would do something if any part of it ran: create
    ``mark``-N files, read root's secrets, search outside the roots."""
    touch = f"touch {mark}"
    return [
        # Confinement dressed up as something else: before, an unknown key was ignored and
        # the command ran with no confinement at all.
        ("exec", {"command": touch + "-1", "Confine": SAFE}, b""),
        ("exec", {"command": touch + "-2", "confine ": SAFE}, b""),
        ("exec", {"command": touch + "-3", "confinement": SAFE}, b""),
        ("exec", {"command": touch + "-4", "confine": SAFE, "confine_level": "dangerous"}, b""),
        ("exec", {"argv": ["sh", "-c", touch + "-5"], "usr": "agent"}, b""),
        ("spawn", {"command": touch + "-6", "Confine": SAFE}, b""),
        # Wrong types and values: a string, a boolean, a float where an integer goes, NaN, huge.
        ("exec", {"command": touch + "-7", "timeout": "10"}, b""),
        ("exec", {"command": touch + "-8", "timeout": True}, b""),
        ("exec", {"command": touch + "-9", "stdout_max": 1.5}, b""),
        ("exec", {"command": touch + "-10", "timeout": math.nan}, b""),
        ("exec", {"command": touch + "-11", "timeout": 1e300}, b""),
        ("exec", {"command": [touch + "-12"]}, b""),
        ("exec", {"command": touch + "-13", "env": ["A=b"]}, b""),
        ("spawn", {"command": touch + "-14", "keep": "all"}, b""),
        ("spawn", {"command": touch + "-15", "output_max": -1}, b""),
        # File ops whose credentials or roots are misspelled would run as root, anywhere.
        ("write", {"path": mark + "-16", "As_user": "agent"}, b"landed"),
        ("write", {"path": mark + "-17", "mode": 0o10000}, b"landed"),
        ("write", {"path": mark + "-18", "expected_sha256": 0}, b"landed"),
        ("mkdir", {"path": mark + "-19", "owner": ["agent"]}, b""),
        ("read", {"path": "/etc/shadow", "as_users": "agent"}, b""),
        ("read", {"path": "/etc/shadow", "roots ": ["/workspace"]}, b""),
        ("stat", {"path": "/root", "read": 64, "Roots": ["/workspace"]}, b""),
        ("grep", {"root": "/etc", "pattern": "root", "rootz": ["/workspace"]}, b""),
        ("find", {"root": "/etc", "regex": ".*", "as_user ": "agent"}, b""),
        ("walk", {"path": "/root", "as-user": "agent"}, b""),
    ]


async def test_wrong_arguments_are_refused_whole_with_the_declarations_error(session: Session) -> None:
    mark = "/workspace/landed"
    requests = attacks(mark)
    rounds = 8
    refused: list[tuple[str, dict[str, Any], str, str]] = []
    landed: list[str] = []

    async def send(op: str, args: dict[str, Any], blob: bytes) -> None:
        try:
            await session.channel.call(op, args, blob, timeout=60)
        except OpError as exc:
            refused.append((op, args, exc.code, exc.message))
        else:
            landed.append(f"{op} {args}")

    # All at once, over and over: the check holds under concurrency, not only one at a time.
    async with anyio.create_task_group() as tg:
        for _ in range(rounds):
            for op, args, blob in requests:
                tg.start_soon(send, op, args, blob)
    files = await session.exec(f"ls {mark}-* 2>/dev/null | wc -l")
    tried = rounds * len(requests)
    landed_files = int(files.stdout.strip())
    print(f"tried {tried}, landed {len(landed) + landed_files} ({len(landed)} answered, {landed_files} files)")
    assert landed == [] and landed_files == 0
    assert len(refused) == tried
    for op, args, code, message in refused:
        assert code == "bad_request"
        assert message == expected_refusal(op, args)
        assert "; usage: " + op + "(" in message
    # Controls: the same requests, spelled right, do run.
    assert (await session.channel.call("exec", {"command": f"touch {mark}-ok"}, timeout=60))[0]["exit_code"] == 0
    confined = (await session.channel.call("exec", {"command": f"touch {mark}-ro", "confine": SAFE}, timeout=60))[0]
    assert confined["exit_code"] != 0 and confined.get("confined") is True
    with pytest.raises(OpError) as err:
        await session.channel.call("read", {"path": "/etc/shadow", "as_user": "agent"}, timeout=60)
    assert err.value.code == "permission_denied"


async def test_the_client_refuses_the_same_requests_unsent(session: Session, monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[str] = []
    real_call = session.channel.call

    async def counting(op: str, *args: Any, **kwargs: Any) -> Any:
        sent.append(op)
        return await real_call(op, *args, **kwargs)

    monkeypatch.setattr(session.channel, "call", counting)
    for op, args, blob in attacks("/workspace/unsent"):
        with pytest.raises(OpError) as err:
            await session.op(op, args, blob)
        assert (err.value.code, err.value.message) == ("bad_request", expected_refusal(op, args))
    assert sent == []
    await session.ping()
    assert sent == ["ping"]


def undeclared(op: str, result: dict[str, Any]) -> list[str]:
    """Fields of a reply of ``op`` that its declaration does not name (and of its lists' entries)."""
    outs = {out.name: out for out in opspec.SPEC[op].results}
    extra = [name for name in result if name not in outs]
    for name, out in outs.items():
        if out.fields and isinstance(result.get(name), list):
            for entry in result[name]:
                extra += [f"{name}.{key}" for key in entry if key not in out.fields]
    return extra


async def test_every_ops_reply_carries_only_declared_fields(session: Session, monkeypatch: pytest.MonkeyPatch) -> None:
    replies: list[tuple[str, dict[str, Any]]] = []
    real_call = session.channel.call

    async def recording(op: str, *args: Any, **kwargs: Any) -> Any:
        result, blob = await real_call(op, *args, **kwargs)
        replies.append((op, result))
        return result, blob

    monkeypatch.setattr(session.channel, "call", recording)
    s = session
    await s.ping()
    await s.mkdir("/workspace/d/e")
    await s.write_file("/workspace/d/a.txt", "needle\nhay\n")
    await s.write_file("/workspace/d/a.txt", "needle\nneedle hay\n", keep_old=1024)
    await s.stat("/workspace/d/a.txt", read=64)
    await s.stat("/workspace/d/new/b.txt", nearest=True)
    await s.read_range("/workspace/d/a.txt", hash=True)
    await s.list_dir("/workspace/d")
    await s.walk("/workspace", detail=True)
    await s.rename("/workspace/d/a.txt", "/workspace/d/b.txt")
    for mode in ("content", "files", "count"):
        await s.grep("/workspace", "needle", mode=mode)  # type: ignore[arg-type]
    await s.grep("/workspace", "needle", paths=["d/b.txt"], engine="python", before=1)
    await s.find("/workspace", ".*", sort="path")
    await s.exec("echo out; echo err >&2")
    task = await s.spawn("read line; echo got $line; sleep 30", name="reader")
    await s.task_write(task.task_id, "x\n")
    await s.task_read(task.task_id, wait=5)
    await s.task_list()
    await s.task_signal(task.task_id, "TERM")
    await s.task_wait(task.task_id, 30)
    await s.task_forget(task.task_id)
    # The egress relay's ops, on a connection a program in the session opens.
    port = await s.net_listen(39123)
    client = await s.spawn(
        ["python3", "-c", f"import socket; c = socket.create_connection(('127.0.0.1', {port})); "
         "c.sendall(b'hi'); print(c.recv(2).decode())"]
    )
    conn = await s.net_accept(30)
    assert conn > 0
    assert (await s.net_read(conn, 1024, 30)).data == b"hi"
    assert await s.net_write(conn, b"yo")
    await s.net_close(conn, "write")
    await s.net_close(conn)
    assert (await s.task_wait(client.task_id, 30)).exit_code == 0
    await s.remove("/workspace/d", recursive=True)
    await s.channel.call("cancel", {"request": 10**9}, timeout=30)

    seen = {op for op, _ in replies}
    assert seen == set(opspec.SPEC), f"not exercised: {sorted(set(opspec.SPEC) - seen)}"
    extra = {op: undeclared(op, result) for op, result in replies if undeclared(op, result)}
    assert extra == {}
