"""The table of per-command rules, and the program names the analysis needs to know."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ...levels import Level
from ..argv import Argv
from ..lexer import Word

if TYPE_CHECKING:
    from ..analysis import Analyzer, Seg

STD_BIN_DIRS = frozenset({"/bin", "/usr/bin", "/usr/local/bin", "/sbin", "/usr/sbin", "/usr/local/sbin"})
DOWNLOADERS = frozenset({"curl", "wget", "fetch", "aria2c", "nc", "ncat", "socat"})
SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "fish", "csh", "tcsh", "ash"})
INTERPRETERS = SHELLS | frozenset(
    {"python", "python2", "python3", "perl", "ruby", "node", "nodejs", "php", "lua", "eval", "source", ".", "tclsh", "deno", "bun"}
)
VERSION_PROBES = frozenset(
    {"python", "python3", "node", "ruby", "perl", "go", "rustc", "cargo", "gcc", "cc", "clang",
     "java", "javac", "npm", "pip", "pip3", "bash", "git", "make", "cmake", "uv", "deno", "bun"}
)

Handler = Callable[["Analyzer", "Seg", str, list[Word]], None]
HANDLERS: dict[str, Handler] = {}


def register(*names: str) -> Callable[[Handler], Handler]:
    def deco(fn: Handler) -> Handler:
        for n in names:
            HANDLERS[n] = fn
        return fn

    return deco


def unsure_dangerous(a: Analyzer, seg: Seg, name: str, argv: Argv) -> bool:
    if argv.unsure:
        a.note(seg, Level.DANGEROUS, f"{name}: an argument computed at run time could be an option that writes or runs code")
        return True
    return False
