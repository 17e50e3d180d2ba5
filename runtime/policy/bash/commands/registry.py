"""The table of per-command rules; each module of this package adds its own on import."""

from __future__ import annotations

from collections.abc import Callable

from ...levels import Level
from ..analysis import Analyzer, Handler, Seg
from ..argv import Argv

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
