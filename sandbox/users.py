"""User identities: a user name or uid from a request to uid, gid, groups and home.

The configured agent user resolves even in images without a passwd entry for it.
"""

import os
import pwd
from typing import Any, Dict, NamedTuple, Tuple

from .errors import DaemonError


class UserInfo(NamedTuple):
    name: str
    uid: int
    gid: int
    home: str
    shell: str
    groups: Tuple[int, ...]


_user_cache: Dict[Any, UserInfo] = {}
# The configured agent user resolves even without a passwd entry (many images have
# none): to uid/gid FALLBACK_UID, with the workspace as home. Set by spawn.configure.
FALLBACK_UID = 1000
_agent: Dict[str, str] = {"name": "agent", "home": "/"}


def configure_agent(name: str, home: str) -> None:
    _agent["name"] = name
    _agent["home"] = home
    _user_cache.clear()


def _from_pw(pw: Any) -> UserInfo:
    try:
        groups = tuple(os.getgrouplist(pw.pw_name, pw.pw_gid))
    except OSError:
        groups = (pw.pw_gid,)
    return UserInfo(pw.pw_name, pw.pw_uid, pw.pw_gid, pw.pw_dir or "/", pw.pw_shell or "/bin/sh", groups)


def resolve_user(spec: Any) -> UserInfo:
    """A user name or uid (int or digits) to its identity; unknown names are a bad_request.

    A uid without a passwd entry is allowed (gid = uid), as in ``docker run -u 1234``.
    Hits are cached (passwd lookups cost a file read); misses are not, so a user
    created later is found.
    """
    if isinstance(spec, bool) or not isinstance(spec, (int, str)) or spec == "":
        raise DaemonError("bad_request", "user must be a name or a uid")
    cached = _user_cache.get(spec)
    if cached is not None:
        return cached
    if isinstance(spec, int) or spec.isdigit():
        uid = int(spec)
        if not 0 <= uid < 2**32 - 1:
            raise DaemonError("bad_request", "uid %d out of range" % uid)
        try:
            info = _from_pw(pwd.getpwuid(uid))
        except KeyError:
            info = UserInfo(str(uid), uid, uid, "/", "/bin/sh", (uid,))
    else:
        try:
            info = _from_pw(pwd.getpwnam(spec))
        except KeyError:
            if spec != _agent["name"]:
                raise DaemonError("no_such_user", "no such user: %s" % spec) from None
            uid = FALLBACK_UID
            return UserInfo(spec, uid, uid, _agent["home"], "/bin/sh", (uid,))  # not cached: useradd may come
    _user_cache[spec] = info
    return info

