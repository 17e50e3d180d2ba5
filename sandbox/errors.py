"""Errors returned to the host, and a checked read of one request argument (``get``, for
the command parser; ``opspec`` checks every request against its op's declaration first).

A handler raises ``DaemonError(code, message)``; the server turns it into
``{"ok": false, "error": {"code", "message"}}``. ``OSError`` is mapped by errno.
"""

import errno
from typing import Any, Dict, Tuple

# The codes docs/protocol.md allows; anything else is a daemon bug.
CODES = frozenset(
    (
        "bad_request",
        "not_found",
        "cwd_not_found",
        "command_not_found",
        "not_executable",
        "no_such_user",
        "output_limit",
        "process_limit",
        "exists",
        "not_a_directory",
        "is_a_directory",
        "permission_denied",
        "conflict",
        "not_plain",
        "no_such_task",
        "too_large",
        "io_error",
        "internal",
    )
)

_ERRNO_CODES = {
    errno.ENOENT: "not_found",
    errno.EEXIST: "exists",
    errno.ENOTDIR: "not_a_directory",
    errno.EISDIR: "is_a_directory",
    errno.EACCES: "permission_denied",
    errno.EPERM: "permission_denied",
}


class DaemonError(Exception):
    """An error the host gets back as a reply (never a crash)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code if code in CODES else "internal"
        self.message = message


class NotPlain(DaemonError):
    """A ``plain`` path that is not the real one: reached through a symbolic link, not a
    regular file, or a file with other names."""

    def __init__(self, path: str, why: str) -> None:
        super().__init__("not_plain", "%s %s" % (path, why))


def from_oserror(exc: OSError) -> DaemonError:
    code = _ERRNO_CODES.get(exc.errno or 0, "io_error")
    text = exc.strerror or str(exc)
    if exc.filename is not None:
        text = "%s: %s" % (text, exc.filename)
    return DaemonError(code, text)


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()

_KIND_NAMES = {str: "a string", int: "an integer", float: "a number", bool: "a boolean", list: "a list", dict: "an object"}


def get(args: Dict[str, Any], name: str, kind: type, default: Any = REQUIRED) -> Any:
    """Return ``args[name]`` checked against ``kind``; null or absent means ``default``.

    bool is refused where an int or float is expected (JSON true is not 1 here).
    """
    value = args.get(name)
    if value is None:
        if default is REQUIRED:
            raise DaemonError("bad_request", "missing argument %r" % name)
        return default
    if kind is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    elif kind is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif isinstance(value, kind):
        return value
    raise DaemonError("bad_request", "argument %r must be %s" % (name, _KIND_NAMES.get(kind, kind.__name__)))


Reply = Tuple[Dict[str, Any], bytes]
