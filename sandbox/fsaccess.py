"""How one fs op reaches the file system: with whose credentials (``as_user``) and
beneath which directories (``roots``), from the request's arguments.

    with fs_access(args) as res:
        fd = res.open(path, os.O_RDONLY)
"""

import contextlib
from typing import Any, Dict, Iterator, Optional

from .fscreds import acting_as
from .pathres import Resolver, parse_decided, parse_roots
from .users import UserInfo, resolve_user


def request_user(args: Dict[str, Any]) -> Optional[UserInfo]:
    value = args.get("as_user")
    return None if value is None else resolve_user(value)


@contextlib.contextmanager
def fs_access(args: Dict[str, Any]) -> Iterator[Resolver]:
    user = request_user(args)
    resolver = Resolver(parse_roots(args.get("roots")), parse_decided(args.get("decided")))
    try:
        with acting_as(user):
            yield resolver
    finally:
        resolver.close()
