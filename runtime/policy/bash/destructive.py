"""Known-destructive patterns, which the policy refuses outright.

The analysis flags them where it meets them (``rm -rf /``, ``mkfs``, ``dd if=``, recursive
``chmod``/``chown`` of a system directory, ``kill -1``, writes to block devices, a download
run by a shell); :func:`backstop` finds them in text that could not be parsed.
"""

from __future__ import annotations

import re

from ..paths import normalize
from .lexer import Word

_SYSTEM_DIRS = frozenset(
    {"/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/opt", "/proc",
     "/root", "/sbin", "/srv", "/sys", "/usr", "/var", "/usr/bin", "/usr/lib", "/usr/local"}
)
BLOCK_DEVICE_RE = re.compile(r"/dev/(?:sd|hd|vd|xvd|nvme|mmcblk|md|dm-|loop|disk/)")
_HOME_RE = re.compile(r'^"?\$(?:HOME|\{HOME\})"?(?:/\*?)?$')


def root_like(word: Word) -> bool:
    """``/``, ``/*``, a system directory, ``~`` or ``$HOME``: never a sane target of rm -r."""
    if word.value is None:
        return _HOME_RE.match(word.raw) is not None
    path = word.value
    if path.startswith("~"):
        path = "/" + path[1:].lstrip("/")
    if not path.startswith("/"):
        return False
    norm = normalize(path)
    if norm.endswith("/*"):
        norm = normalize(norm[:-2] or "/")
    return norm in _SYSTEM_DIRS


_CMD_POS = (
    r"(?:^|[;&|(){}\n`]|\$\()\s*+"
    r"(?:(?:sudo|doas|command|builtin|exec|nohup|nice|time|env|busybox|xargs)\s++(?:-\S++\s++)*+)*+"
    r"(?:[^\s/;&|(){}\n`$]*+/)*+"
)
_FORK_BOMB_RE = re.compile(
    r"(?<![\w:.-])([A-Za-z_:][\w:.-]*+)\s*+\(\s*+\)\s*+\{[^}]{0,200}?(?<![\w:.-])\1\s*+\|\s*+&?\s*+\1\s*+&"
)
_RM_ROOT_RE = re.compile(
    _CMD_POS + r"rm((?:\s++-\S++)*+)\s++['\"]?(?:/|/\*|~/?\*?|\$\{?HOME\}?/?\*?)['\"]?(?=\s|$|[;&|)])"
)
_FORMAT_RE = re.compile(_CMD_POS + r"(?:mkfs(?:\.\w++)?|mke2fs|mkswap|wipefs)\b")
_DD_RE = re.compile(_CMD_POS + r"dd\s[^;&|\n]*?\bif=")
_PERMS_RE = re.compile(_CMD_POS + r"(?:chmod|chown)\s([^;&|\n]*+)")
_DOWNLOAD_RE = re.compile(r"\b(?:curl|wget|fetch)\b")
_PIPE_TO_SHELL_RE = re.compile(
    r"\|\s*+(?:sudo\s++(?:-\S++\s++)*+)?(?:[^\s/|]*+/)*+"
    r"(?:(?:ba|z|da|k|c|tc|fi|a)?sh|python[0-9.]*+|perl|ruby|node|php)\b"
)


def backstop(text: str) -> str | None:
    """Destructive patterns in text the parser could not take apart."""
    if _FORK_BOMB_RE.search(text):
        return "fork-bomb"
    if "--no-preserve-root" in text:
        return "rm-rf-root"
    for m in _RM_ROOT_RE.finditer(text):
        if re.search(r"(?:^|\s)(?:-[a-zA-Z]*[rR][a-zA-Z]*|--recursive)(?=\s|$)", m.group(1)):
            return "rm-rf-root"
    if _FORMAT_RE.search(text):
        return "mkfs"
    if _DD_RE.search(text):
        return "dd"
    for m in _PERMS_RE.finditer(text):
        args = m.group(1)
        if re.search(r"(?:^|\s)(?:-[a-zA-Z]*R|--recursive)", args) and re.search(r"(?:^|\s)['\"]?/['\"]?(?:\s|$)", args):
            return "chmod-recursive-root"
    for chunk in re.split(r"[\n;&]", text):
        found = _DOWNLOAD_RE.search(chunk)
        if found and _PIPE_TO_SHELL_RE.search(chunk, found.end()):
            return "download-piped-to-shell"
    return None
