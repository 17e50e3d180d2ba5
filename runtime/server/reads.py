"""A tenant's reads of file contents under the session's secret policy: a secret file (by its
name or by the name it really has) is refused, and the bytes are read by that real name with
the daemon refusing a link or a file with other names, so nothing swapped in between the look
and the read is read instead. The session's roots are the agent client's own (tenancy.Live)."""

from __future__ import annotations

from collections.abc import Callable

from caisson.client.models import ReadResult
from caisson.client.primitives import CHUNK
from caisson.errors import OpError
from caisson.policy import is_secret
from caisson.server.tenancy import Live


def hidden(live: Live) -> Callable[[str], bool]:
    """Whether the session's secret policy hides a full path's contents from a tenant."""
    policy = live.session.policy
    return lambda name: is_secret(name, policy.secret_patterns, policy.secret_exceptions) is not None


async def readable(live: Live, path: str) -> str:
    """The real path of ``path``, when the secret policy lets a tenant read it."""
    st = await live.agent.stat(path)
    if not st.exists:
        raise OpError("not_found", f"{path} does not exist in the session")
    for name in {live.agent.resolve(path), st.realpath or live.agent.resolve(path)}:
        if hidden(live)(name):
            raise OpError(
                "permission_denied",
                f"{path} is a secret file under the session's policy: a tenant's reads leave secrets out "
                "(a tool call that reads it asks the tenant's approvers)",
            )
    if st.type == "file" and st.nlink > 1:
        # Another of its names may be a secret's.
        raise OpError("permission_denied", f"{path} has other names (hard links): a tenant's reads leave it out")
    return st.realpath or live.agent.resolve(path)


async def read_range(live: Live, path: str, offset: int, length: int, *, hash: bool = False) -> ReadResult:
    return await live.agent.read_range(await readable(live, path), offset, length, hash=hash, plain=True)


async def read_bytes(live: Live, path: str, offset: int, length: int, *, max_size: int | None) -> bytes:
    """The bytes of a file (or ``length`` of them from ``offset``), chunk by chunk."""
    real = await readable(live, path)
    parts: list[bytes] = []
    while length != 0:
        piece = await live.agent.read_range(
            real, offset, CHUNK if length < 0 else min(length, CHUNK), max_size=max_size, plain=True
        )
        parts.append(piece.data)
        offset += len(piece.data)
        length = length - len(piece.data) if length > 0 else length
        if piece.eof or not piece.data:
            break
    return b"".join(parts)
