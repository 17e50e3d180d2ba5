"""Commands that run other commands: nice/timeout/…, env, sudo and other privilege or
namespace changers, xargs, shells, eval and source."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...levels import Level
from ..lexer import ASSIGN_RE, Word
from ..programs import SHELLS
from ..variables import sensitive_var
from .registry import register

if TYPE_CHECKING:
    from ..analysis import Analyzer, Seg

_S, _C, _D = Level.SAFE, Level.CAUTIOUS, Level.DANGEROUS


def run_inner(a: Analyzer, seg: Seg, wrapper: str, inner: list[Word]) -> None:
    if inner:
        a.note(seg, _S, f"{wrapper}: runs a command")
        a.command(inner)
    else:
        a.note(seg, _S, f"{wrapper}: read-only")


@register("nice", "nohup", "time", "timeout", "stdbuf", "command", "builtin", "exec", "busybox", "ionice")
def _h_wrapper(a: Analyzer, seg: Seg, name: str, args: list[Word]) -> None:
    i = 0
    if name == "command" and any(w.value in ("-v", "-V") for w in args[:1]) and all(w.static for w in args):
        a.note(seg, _S, "command -v: looks a name up")
        return
    if name in ("command", "builtin", "exec"):
        # They skip functions and aliases, or replace the shell (exec with redirections
        # alone changes the descriptors of every later command): the inner command is still
        # analysed for destructive patterns.
        a.note(seg, _D, f"{name}: runs a command past the shell's own lookup, or replaces the shell")
    value_opts = {
        "nice": {"-n", "--adjustment"},
        "timeout": {"-s", "--signal", "-k", "--kill-after"},
        "time": {"-f", "--format", "-o", "--output"},
        "stdbuf": {"-i", "-o", "-e"},
        "exec": {"-a"},
        "ionice": {"-c", "-n", "-p", "-P", "-u", "--class", "--classdata"},
    }.get(name, set())
    while i < len(args):
        w = args[i]
        v = w.value
        if v is None:
            a.note(seg, _D, f"{name}: the command is computed at run time")
            return
        if v == "--":
            i += 1
            break
        if not v.startswith("-") or v == "-":
            break
        if name == "time" and (v in ("-o", "--output") or v.startswith("--output=")):
            target = Word(v.split("=", 1)[1], v.split("=", 1)[1]) if "=" in v else (args[i + 1] if i + 1 < len(args) else Word(".", "."))
            a.write(seg, target, "time -o writes")
        if v in value_opts:
            i += 2
            continue
        i += 1
    if name == "timeout":
        i += 1  # the duration
    run_inner(a, seg, name, args[i:])


@register("env")
def _h_env(a: Analyzer, seg: Seg, name: str, args: list[Word]) -> None:
    i = 0
    while i < len(args):
        w = args[i]
        v = w.value
        if v is None:
            a.note(seg, _D, "env: an argument computed at run time")
            return
        if v in ("-i", "--ignore-environment", "-"):
            a.note(seg, _D, "env -i: runs the command without the environment the sandbox gives it (git's guard among it)")
            return
        if v in ("-0", "--null"):
            i += 1
        elif v in ("-u", "--unset") or v.startswith("--unset=") or (v.startswith("-u") and len(v) > 2):
            unset = args[i + 1].value if v in ("-u", "--unset") and i + 1 < len(args) else v.partition("=")[2] or v[2:]
            if unset is None or sensitive_var(unset):
                a.note(seg, _D, f"env -u {unset}: removes a variable the sandbox or the session relies on")
                return
            i += 2 if v in ("-u", "--unset") else 1
        elif v == "--":
            i += 1
            break
        elif v.startswith("-"):
            a.note(seg, _D, f"env {v}: splits or changes how the command runs")
            return
        elif ASSIGN_RE.match(v):
            var = ASSIGN_RE.match(v).group(1)  # type: ignore[union-attr]
            if sensitive_var(var):
                a.note(seg, _D, f"env sets {var}, which changes what the command runs")
            i += 1
        else:
            break
    run_inner(a, seg, name, args[i:])


@register("sudo", "doas", "su", "runuser", "chroot", "unshare", "nsenter", "setsid")
def _h_privileged(a: Analyzer, seg: Seg, name: str, args: list[Word]) -> None:
    a.note(seg, _D, f"{name}: runs a command with other privileges or namespaces")
    value_opts = {"-u", "-g", "-h", "-p", "-r", "-t", "-C", "-D", "-U", "-T"}
    i = 0
    while i < len(args) and (args[i].value or "").startswith("-"):
        i += 2 if args[i].value in value_opts else 1
    if name in ("sudo", "doas", "setsid") and i < len(args) and args[i].static:
        a.command(args[i:])


@register("xargs")
def _h_xargs(a: Analyzer, seg: Seg, name: str, args: list[Word]) -> None:
    value_opts = {"-I", "-L", "-l", "-n", "-P", "-s", "-d", "-E", "-e", "-a", "--arg-file", "--delimiter",
                  "--max-args", "--max-procs", "--max-lines", "--max-chars", "--eof", "--replace", "--process-slot-var"}
    i = 0
    replace: str | None = None
    while i < len(args):
        v = args[i].value
        if v is None:
            a.note(seg, _D, "xargs: an argument computed at run time")
            return
        if not v.startswith("-"):
            break
        if v in ("-a", "--arg-file") and i + 1 < len(args):
            a.read(seg, args[i + 1])
        if v == "-I" and i + 1 < len(args):
            replace = args[i + 1].value
        elif v.startswith("-I") and len(v) > 2:
            replace = v[2:]
        elif v == "-i" or v.startswith(("-i", "--replace")):
            replace = "{}"
        i += 2 if v in value_opts else 1
    inner = args[i:] or [Word("echo", "echo")]
    if replace:
        inner = [Word(w.raw, None) if w.value and replace in w.value else w for w in inner]
    # The arguments xargs appends come from input: they could be anything, options included.
    a.note(seg, _C, "xargs: runs a command on input it cannot see, which may name secret files")
    a.command([*inner, Word("<input>", None)])


@register(*SHELLS, "eval", "source", ".")
def _h_shell(a: Analyzer, seg: Seg, name: str, args: list[Word]) -> None:
    a.note(seg, _D, f"{name}: runs a script")
    script: str | None = None
    if name == "eval":
        if args and all(w.value is not None for w in args):
            script = " ".join(w.value or "" for w in args)
    else:
        for i, w in enumerate(args):
            v = w.value or ""
            if v.startswith("-") and "c" in v[1:] and not v.startswith("--"):
                if i + 1 < len(args) and args[i + 1].value is not None:
                    script = args[i + 1].value
                break
            if not v.startswith("-"):
                break
    if script is not None:
        # Classified for its commands and destructive patterns; the shell stays dangerous
        # (BASH_ENV, functions and aliases may change what the string runs).
        a.analyze_text(script)

