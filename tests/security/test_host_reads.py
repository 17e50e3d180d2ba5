"""The embedding program's reads of the agent's files (copy_out, copy_out_to, diff, and caisson
serve's copy-out route) follow the secret policy and the session's roots by default; only
include_secrets=True, which the library's caller alone can pass, sees everything."""

from __future__ import annotations

import io
import tarfile
import uuid

import pytest

from caisson import Runtime, Session
from caisson.errors import OpError

pytestmark = pytest.mark.anyio

TOKEN = f"tok-{uuid.uuid4().hex}"
W = "/workspace"


async def archived(s: Session, path: str, include_secrets: bool = False) -> bytes:
    tar = b"".join([piece async for piece in s.copy_out(path, include_secrets=include_secrets)])
    out = b""
    with tarfile.open(fileobj=io.BytesIO(tar)) as t:
        for member in t.getmembers():
            f = t.extractfile(member) if member.isfile() else None
            out += member.name.encode() + b"\n" + (f.read() if f else b"")
    return out


async def plant(s: Session) -> None:
    agent = s.config.agent_user
    for name in (".env", "config/prod.env", "deploy/id_ed25519", "certs/server.KEY", "credentials.json"):
        await s.write_file(f"{W}/{name}", f"KEY={TOKEN}\n", mode=0o600, owner=agent)
    await s.write_file(f"{W}/notes.txt", "ordinary\n", owner=agent)
    await s.write_file("/root/secret.txt", f"ROOT={TOKEN}\n", mode=0o600)
    await s.write_file("/opt/app.txt", f"OUT={TOKEN}\n", mode=0o644)
    res = await s.exec(f"cd {W} && ln .env linked.txt && ln -s .env sym.txt && mkdir -p sub && ln -s ../.env sub/up",
                       user=agent)
    assert res.exit_code == 0, res.stderr


@pytest.mark.parametrize("gvisor", [False, True], ids=["runc", "gvisor"])
async def test_host_reads_keep_secrets_by_default(rt: Runtime, gvisor: bool) -> None:
    async with rt.session(gvisor=gvisor) as s:
        await plant(s)
        attempts = [f"{W}/.env", ".env", f"{W}", f"{W}/linked.txt", f"{W}/sym.txt", f"{W}/sub", f"{W}/deploy",
                    "/root", "/root/secret.txt", "/opt/app.txt", "/opt", f"{W}/../root/secret.txt"]
        landed = []
        for path in attempts:
            try:
                if TOKEN.encode() in await archived(s, path):
                    landed.append(("copy_out", path))
            except OpError:
                pass
        for path in (None, W, "/root", "/opt", f"{W}/config"):
            try:
                d = await s.diff(path)
            except OpError:
                continue
            if TOKEN in d.model_dump_json():
                landed.append(("diff", path))
        whole = await archived(s, W)
        opted = await archived(s, W, include_secrets=True)
        everything = await s.diff(include_secrets=True)
    tried = len(attempts) + 5
    print(f"host reads of secrets ({'gvisor' if gvisor else 'runc'}): tried {tried}, landed {len(landed)}: {landed}")
    assert landed == []
    assert b"notes.txt\nordinary" in whole
    # The embedding program's own opt-in sees them.
    assert TOKEN.encode() in opted and TOKEN in everything.model_dump_json()
