"""Shell builtins that set variables or options or change directory: printf -v, read,
declare/export/local, set, cd/pushd/popd."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ...levels import Level
from ..argv import getopt
from ..lexer import ASSIGN_RE, NAME_RE, Word
from ..variables import evaluates_subscript, plain_name, sensitive_var
from .registry import register

if TYPE_CHECKING:
    from ..analysis import Analyzer, Seg

_S, _C, _D = Level.SAFE, Level.CAUTIOUS, Level.DANGEROUS


@register("printf")
def _h_printf(a: Analyzer, seg: Seg, name: str, args: list[Word]) -> None:
    if args and args[0].value == "-v":
        target = args[1] if len(args) > 1 else None
        if target is None or target.value is None or sensitive_var(target.value) or not NAME_RE.fullmatch(target.value):
            a.note(seg, _D, "printf -v assigns a sensitive or computed variable")
            return
    elif args and not args[0].static:
        a.note(seg, _D, "printf: a format computed at run time could be -v")
        return
    a.note(seg, _S, "printf: read-only")


@register("read")
def _h_read(a: Analyzer, seg: Seg, name: str, args: list[Word]) -> None:
    argv = getopt(args, "adinNptu")
    names = argv.operands + argv.values("-a")
    if argv.unsure or any(not plain_name(w) or sensitive_var(w.value or "") for w in names):
        a.note(seg, _D, "read assigns a sensitive, computed or subscripted variable (a subscript runs code)")
        return
    a.note(seg, _S, "read: sets shell variables")


@register("test", "[")
def _h_test(a: Analyzer, seg: Seg, name: str, args: list[Word]) -> None:
    words = args[:-1] if name == "[" and args and args[-1].value == "]" else args
    if evaluates_subscript(words):
        a.note(seg, _D, f"{name} -v: the array subscript is evaluated, which can run code")
        return
    a.note(seg, _S, f"{name}: read-only")


@register("unset")
def _h_unset(a: Analyzer, seg: Seg, name: str, args: list[Word]) -> None:
    for w in args:
        if w.value in ("-v", "-f", "-n", "--"):
            continue
        if not plain_name(w):
            a.note(seg, _D, "unset of a subscripted or computed name (the subscript is evaluated)")
            return
        if (w.value or "").startswith("GIT_"):
            a.note(seg, _D, f"unset {w.value}: removes a git setting the sandbox gives commands")
            return
    a.note(seg, _S, "unset: removes shell variables")


@register("wait")
def _h_wait(a: Analyzer, seg: Seg, name: str, args: list[Word]) -> None:
    argv = getopt(args, "p")
    if argv.unsure or not all(plain_name(w) for w in argv.values("-p")):
        a.note(seg, _D, "wait -p assigns a subscripted or computed name (the subscript is evaluated)")
        return
    a.note(seg, _S, "wait: waits for jobs")


@register("jobs")
def _h_jobs(a: Analyzer, seg: Seg, name: str, args: list[Word]) -> None:
    argv = getopt(args)
    if argv.unsure or argv.has("-x"):
        a.note(seg, _D, "jobs -x runs a command")
        return
    a.note(seg, _S, "jobs: lists jobs")


@register("export", "declare", "typeset", "local", "readonly")
def _h_declare(a: Analyzer, seg: Seg, name: str, args: list[Word]) -> None:
    allowed = {"-x", "-r", "-p", "-g", "-a", "-A", "-l", "-u", "-t", "+x", "+r", "+t", "--"}
    if name != "export":
        allowed |= {"-f", "-F"}  # declare -f prints functions; export -f exports them
    for w in args:
        if not w.static:
            # NAME=$(…) names its variable statically; only the value is computed.
            m = ASSIGN_RE.match(w.raw)
            if m is None or m.group(2):
                a.note(seg, _D, f"{name}: an argument computed at run time")
                return
            if sensitive_var(m.group(1)):
                a.note(seg, _D, f"{name} sets {m.group(1)}, which changes what later commands run")
                return
            continue
        v = w.value or ""
        if v.startswith(("-", "+")):
            flags = [v] if v in allowed else [v[0] + ch for ch in v[1:]]
            if any(f not in allowed for f in flags):
                a.note(seg, _D, f"{name} {v}: evaluates or exports code (nameref, integer or function)")
                return
            continue
        var = v.split("=", 1)[0].removesuffix("+")
        if not NAME_RE.fullmatch(var):
            a.note(seg, _D, f"{name}: assigns something other than a plain variable")
            return
        if sensitive_var(var):
            a.note(seg, _D, f"{name} sets {var}, which changes what later commands run")
            return
    a.note(seg, _S, f"{name}: sets shell variables")


_SET_OPTIONS = frozenset({"errexit", "nounset", "pipefail", "xtrace", "verbose", "noclobber", "noglob", "notify", "noexec"})


@register("set")
def _h_set(a: Analyzer, seg: Seg, name: str, args: list[Word]) -> None:
    i = 0
    while i < len(args):
        w = args[i]
        v = w.value
        if v is None:
            a.note(seg, _D, "set: an argument computed at run time")
            return
        if v == "--":
            break
        if v in ("-o", "+o"):
            opt = args[i + 1].value if i + 1 < len(args) else None
            if opt is not None and opt not in _SET_OPTIONS:
                a.note(seg, _D, f"set -o {opt}")
                return
            i += 2
            continue
        if v[:1] in "-+" and set(v[1:]) <= set("euxvCfnbo") and v[1:]:
            if "o" in v[1:]:
                opt = args[i + 1].value if i + 1 < len(args) else None
                if opt is not None and opt not in _SET_OPTIONS:
                    a.note(seg, _D, f"set -o {opt}")
                    return
                i += 1
            i += 1
            continue
        if v[:1] in "-+":
            a.note(seg, _D, f"set {v}")
            return
        break
    a.note(seg, _S, "set: shell options")


@register("cd", "pushd", "popd")
def _h_cd(a: Analyzer, seg: Seg, name: str, args: list[Word]) -> None:
    operands = [w for w in args if not (w.static and re.fullmatch(r"-[LPe@n]+", w.value or ""))]
    target = operands[0] if operands else None
    rotates = name == "pushd" and (target is None or (target.value or "").startswith(("+", "-")))
    if name == "popd" or rotates or target is None or not target.static or (target.value or "").startswith(("~", "-")):
        a.chdir(None)
    else:
        a.chdir(target.value or "")
    a.note(seg, _S, f"{name}: changes directory")

