"""A tenant's changes to a session's files under the session's policy, as the agent's tool calls
are decided: a write, a copy-in's every member (``copy_in``), a new directory, a removal or a rename is
decided on the path the daemon will really change (links followed where the daemon follows
them), and refused when that path or the name given is outside the session's roots,
protected (what programs run or read at start: shell start-up files, the home's dot entries
and ``~/bin``, ``.git``, Python's site hooks, ...), a secret file, or named by a deny or ask
rule of the policy on paths (``Policy.path_rule_for_change``). Every change is
``plain``: the daemon refuses a link (or, for a write, another name) swapped in between the
look and the change. A tenant changes such files through a tool call or a command, which the
policy decides and the tenant's approvers answer."""

from __future__ import annotations

import posixpath
from collections.abc import Awaitable
from typing import TypeVar

from caisson.client.models import StatResult, WriteResult
from caisson.errors import OpError
from caisson.policy import is_secret, is_within
from caisson.policy.model import Access
from caisson.policy.paths import matches_any, normalize
from caisson.server.tenancy import Live

T = TypeVar("T")

# What a refusal tells the tenant to do instead.
INSTEAD = (
    "make this change with a tool call (POST /v1/sessions/{id}/calls, e.g. write_file) or a command "
    "(POST /v1/sessions/{id}/exec), which the session's policy decides, asking the tenant's approvers "
    "(/v1/approvals) where it needs approval"
)
# A directory renamed has every entry beneath it decided at its new place; more than this is refused.
MAX_MOVED = 100_000


def refusal(live: Live, path: str, access: Access = "write") -> str | None:
    """Why the session's policy keeps a tenant from changing (``access``: writing or deleting)
    the full, normalised ``path``."""
    policy = live.session.policy
    if not is_within(path, policy.workspace_roots):
        return f"{path} is outside the session's workspace roots ({', '.join(policy.workspace_roots)})"
    # An entry whose contents would be protected is too (a link or a directory renamed onto
    # `.husky`, whose hooks a repository's config may name).
    protected = matches_any(policy.protected_paths, path) or matches_any(policy.protected_paths, path + "/-")
    if protected:
        return (
            f"{path} is a protected path ({protected}): programs run or read what it holds when they start "
            "(shell start-up files, git's hooks and config, Python's site hooks, the home's dot entries and ~/bin)"
        )
    secret = is_secret(path, policy.secret_patterns, policy.secret_exceptions)
    if secret:
        return f"{path} is a secret file under the session's policy ({secret!r})"
    bound = policy.path_rule_for_change(path, access)
    if bound:
        name, rule = bound
        why = "is denied by" if rule.effect == "deny" else "needs an approval, which only a call can ask for, under"
        return f"{path} {why} the session's policy rule {name}" + (f" ({rule.message})" if rule.message else "")
    return None


def check(live: Live, *paths: str, access: Access = "write") -> None:
    for path in dict.fromkeys(paths):
        why = refusal(live, path, access)
        if why is not None:
            raise OpError("permission_denied", f"{why}; a tenant's writes may not change it: {INSTEAD}")


async def landing(live: Live, path: str, *, follow: bool = True, access: Access = "write") -> tuple[str, StatResult]:
    """The real path a change to ``path`` reaches, checked against the policy with the name as
    given, and what is there now. ``follow``: a final symbolic link is followed (a write goes to
    its target); else the link itself is what changes (remove, rename)."""
    given = normalize(live.agent.resolve(path))
    if follow:
        st = await live.agent.stat(given, nearest=True)
        real = st.realpath if st.exists and st.realpath else normalize(st.nearest or given)
    else:
        head, name = posixpath.split(given)
        if not name or name == "..":
            raise OpError("bad_request", f"{path} does not name a directory entry")
        above = await live.agent.stat(head, nearest=True)
        real = posixpath.join(above.realpath if above.exists and above.realpath else normalize(above.nearest or head), name)
        st = await live.agent.stat(given, follow=False)
    check(live, given, real, access=access)
    return real, st


async def plain(change: Awaitable[T]) -> T:
    """``change`` (a plain write, mkdir, removal or rename), its ``not_plain`` refusal said as a tenant's."""
    try:
        return await change
    except OpError as exc:
        if exc.code != "not_plain":
            raise
        raise OpError(
            "permission_denied",
            f"{exc.message}: a tenant writes only by a file's real and only name (no symbolic link on the "
            "way or at its end, no other names; one may have been swapped in meanwhile). Write the real path, "
            f"or {INSTEAD}",
        ) from None


async def directory(live: Live, path: str) -> None:
    """``path`` made, with its parents, where it is no directory yet (a link there is refused)."""
    st = await live.agent.stat(path, follow=False)
    if not (st.exists and st.type == "dir"):
        await plain(live.agent.mkdir(path, plain=True))


async def write_file(live: Live, path: str, data: bytes, *, expected_sha256: str | None, mode: int | None) -> WriteResult:
    real, st = await landing(live, path)
    if not st.exists:
        await directory(live, posixpath.dirname(real))
    return await plain(live.agent.write_file(real, data, expected_sha256=expected_sha256, mode=mode, plain=True))


async def mkdir(live: Live, path: str, *, parents: bool, exist_ok: bool) -> bool:
    real, _ = await landing(live, path)
    return await plain(live.agent.mkdir(real, parents=parents, exist_ok=exist_ok, plain=True))


async def _beneath(live: Live, given: str, real: str, st: StatResult) -> list[str]:
    """The entries beneath a directory, relative to it (none for anything else): a removal or
    a rename changes each of them too."""
    if not (st.exists and st.type == "dir"):
        return []
    inside = await live.agent.walk(real, include_hidden=True, ignore_files=(), max_entries=MAX_MOVED)
    if inside.truncated:
        raise OpError("permission_denied", f"{given} holds more than {MAX_MOVED} entries to decide on: {INSTEAD}")
    return [entry.path for entry in inside.entries]


async def remove(live: Live, path: str, *, recursive: bool, missing_ok: bool) -> bool:
    real, st = await landing(live, path, follow=False, access="delete")
    if recursive:
        check(live, *(posixpath.join(real, rel) for rel in await _beneath(live, path, real, st)), access="delete")
    return await plain(live.agent.remove(real, recursive=recursive, missing_ok=missing_ok, plain=True))


async def rename(live: Live, src: str, dst: str, *, overwrite: bool) -> None:
    """A directory moves with everything beneath it: each entry is decided where it leaves and
    at its new place too (a directory holding ``hooks/`` renamed to ``.git`` plants them)."""
    src_real, st = await landing(live, src, follow=False, access="delete")
    dst_real, _ = await landing(live, dst, follow=False)
    inside = await _beneath(live, src, src_real, st)
    check(live, *(posixpath.join(src_real, rel) for rel in inside), access="delete")
    check(live, *(posixpath.join(dst_real, rel) for rel in inside))
    await plain(live.agent.rename(src_real, dst_real, overwrite=overwrite, plain=True))
