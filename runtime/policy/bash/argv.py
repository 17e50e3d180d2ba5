"""Option parsing for argv lists (GNU getopt style), as the commands' rules need it."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .lexer import Word


@dataclass
class Argv:
    opts: list[tuple[str, Word | None]]
    operands: list[Word]
    # Some argument is computed at run time or globbed, so it could turn out to be an option.
    unsure: bool

    def has(self, *names: str) -> bool:
        return any(opt_is(o, n) for o, _ in self.opts for n in names)

    def values(self, *names: str) -> list[Word]:
        return [v for o, v in self.opts if v is not None and any(opt_is(o, n) for n in names)]


def opt_is(given: str, name: str) -> bool:
    """``--in-pl`` abbreviates ``--in-place`` for GNU getopt_long; treat prefixes as matches."""
    if given == name:
        return True
    return name.startswith("--") and given.startswith("--") and len(given) > 3 and name.startswith(given)


def getopt(args: Sequence[Word], short_values: str = "", long_values: Iterable[str] = ()) -> Argv:
    long_values = tuple(long_values)
    opts: list[tuple[str, Word | None]] = []
    operands: list[Word] = []
    unsure = False
    i = 0
    while i < len(args):
        w = args[i]
        i += 1
        if not w.static:
            unsure = True
            operands.append(w)
            continue
        v = w.value or ""
        if v == "--":
            operands.extend(args[i:])
            unsure |= any(not a.static for a in args[i:])
            break
        if v.startswith("--"):
            name, eq, val = v.partition("=")
            if eq:
                opts.append((name, Word(val, val)))
            elif any(opt_is(name, lv) for lv in long_values) and i < len(args):
                opts.append((name, args[i]))
                i += 1
            else:
                opts.append((name, None))
        elif v.startswith("-") and len(v) > 1:
            j = 1
            while j < len(v):
                letter = v[j]
                if letter in short_values:
                    rest = v[j + 1 :]
                    if rest:
                        opts.append(("-" + letter, Word(rest, rest)))
                    elif i < len(args):
                        opts.append(("-" + letter, args[i]))
                        i += 1
                    else:
                        opts.append(("-" + letter, None))
                    break
                opts.append(("-" + letter, None))
                j += 1
        else:
            operands.append(w)
    return Argv(opts, operands, unsure)
