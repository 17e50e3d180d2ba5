"""Commands that create, change or delete files: cp/mv/ln/mkdir/touch/tee/truncate, chmod,
chown, rm and friends, dd, shutdown, kill, and find (whose -exec/-delete/-fprint act)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ...levels import Level
from ..argv import Argv, getopt
from ..destructive import root_like
from ..lexer import ANY, Word
from .registry import register

if TYPE_CHECKING:
    from ..analysis import Analyzer, Seg

_S, _C, _D = Level.SAFE, Level.CAUTIOUS, Level.DANGEROUS


_WRITE_OPTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "mkdir": ("mZ", ("--mode", "--context")),
    "touch": ("drt", ("--date", "--reference", "--time")),
    "cp": ("StT", ("--target-directory", "--suffix")),
    "mv": ("StT", ("--target-directory", "--suffix")),
    "ln": ("StT", ("--target-directory", "--suffix")),
    "tee": ("", ("--output-error",)),
    "truncate": ("sr", ("--size", "--reference")),
}


@register(*_WRITE_OPTS)
def _h_write(a: Analyzer, seg: Seg, name: str, args: list[Word]) -> None:
    short, long_ = _WRITE_OPTS[name]
    argv = getopt(args, short, long_)
    operands = argv.operands
    targets: list[Word]
    sources: list[Word] = []
    target_dir = argv.values("-t", "--target-directory")
    if name in ("cp", "mv", "ln"):
        if target_dir:
            targets, sources = target_dir, operands
        elif name == "ln" and len(operands) == 1:
            targets, sources = [Word(".", ".")], operands
        else:
            targets, sources = operands[-1:], operands[:-1]
        if name == "mv":
            targets = targets + sources  # moving removes the source name
    else:
        targets = operands
    for w in argv.values("-r", "--reference"):
        a.read(seg, w)
    if name in ("cp", "mv"):
        # Copying or renaming a secret file gives its content a name that is not secret.
        for w in sources:
            a.read(seg, w)
    if name == "ln":
        # A link can point anywhere, and later "workspace" writes through it land there.
        a.note(seg, _D, "ln creates a link, which can lead writes out of the workspace")
    if name == "cp" and _copies_links(argv):
        a.note(seg, _D, "cp creates or copies links (-s, -l, -a, -d, -P, -r without -L)")
    if not targets:
        a.note(seg, _C, f"{name}: writes files")
    for w in targets:
        a.write(seg, w, f"{name} writes")


def _copies_links(argv: Argv) -> bool:
    if argv.has("-s", "--symbolic-link", "-l", "--link", "-a", "--archive", "-d", "-P", "--no-dereference"):
        return True
    if any("links" in (w.value or "") or "all" in (w.value or "") for w in argv.values("--preserve")):
        return True
    if argv.has("--preserve") and not argv.values("--preserve"):
        return False
    # GNU cp -R copies the links it meets as links unless told to follow them.
    return argv.has("-r", "-R", "--recursive") and not argv.has("-L", "--dereference")


@register("chmod")
def _h_chmod(a: Analyzer, seg: Seg, name: str, args: list[Word]) -> None:
    mode_re = re.compile(r"[ugoa]*(?:[-+=][rwxXstugo]*)+(?:,[ugoa]*(?:[-+=][rwxXstugo]*)+)*|[0-7]{1,4}")
    recursive = False
    mode_seen = False
    targets: list[Word] = []
    for w in args:
        v = w.value
        if v is not None and v in ("-R", "--recursive"):
            recursive = True
        elif v is not None and (v.startswith("--reference=") or (not mode_seen and mode_re.fullmatch(v))):
            mode_seen = True
        elif v is not None and v.startswith("-") and set(v[1:]) <= set("Rcfv"):
            recursive |= "R" in v
        elif v is not None and v.startswith("--"):
            continue
        else:
            targets.append(w)
    if recursive and any(root_like(w) for w in targets):
        a.flag_destructive("chmod-recursive-root", "recursive permission change on a system directory")
    for w in targets:
        a.write(seg, w, "chmod changes")


@register("chown", "chgrp")
def _h_chown(a: Analyzer, seg: Seg, name: str, args: list[Word]) -> None:
    argv = getopt(args, "", ("--reference", "--from"))
    if (argv.has("-R", "--recursive") and any(root_like(w) for w in argv.operands[1:])) or argv.has("--no-preserve-root"):
        a.flag_destructive("chown-recursive-root", f"recursive {name} on a system directory")
    a.note(seg, _D, f"{name}: changes file ownership")


# ------------------------------------------------------------------ deletes and destruction


@register("rm")
def _h_rm(a: Analyzer, seg: Seg, name: str, args: list[Word]) -> None:
    argv = getopt(args)
    recursive = argv.has("-r", "-R", "--recursive")
    if argv.has("--no-preserve-root"):
        a.flag_destructive("rm-rf-root", "rm --no-preserve-root")
    elif recursive and any(root_like(w) for w in argv.operands):
        a.flag_destructive("rm-rf-root", "recursive delete of /, a system directory or home")
    a.note(seg, _D, "rm: deletes files")


@register("rmdir", "unlink", "shred", "srm")
def _h_delete(a: Analyzer, seg: Seg, name: str, args: list[Word]) -> None:
    a.note(seg, _D, f"{name}: deletes files")


@register("dd")
def _h_dd(a: Analyzer, seg: Seg, name: str, args: list[Word]) -> None:
    if any(w.text.startswith("if=") for w in args):
        a.flag_destructive("dd", "dd if= copies raw data")
    a.note(seg, _D, "dd: raw data copy")


@register("shutdown", "reboot", "halt", "poweroff", "killall5")
def _h_power(a: Analyzer, seg: Seg, name: str, args: list[Word]) -> None:
    a.flag_destructive("shutdown", f"{name} stops the system")
    a.note(seg, _D, f"{name}: stops the system")


@register("kill", "pkill", "killall")
def _h_kill(a: Analyzer, seg: Seg, name: str, args: list[Word]) -> None:
    if name == "kill":
        pids = [w.value for w in args if w.value is not None and not re.fullmatch(r"-[A-Za-z]+\d*|-\d+|-s|-n|--", w.value)]
        if "-1" in [w.value for w in args[-1:]] or "-1" in pids:
            a.flag_destructive("kill-all", "kill -1 signals every process")
    a.note(seg, _D, f"{name}: signals processes")


# ------------------------------------------------------------------ find, sed, awk

_FIND_VALUE = frozenset(
    ["-name", "-iname", "-path", "-ipath", "-wholename", "-iwholename", "-regex", "-iregex", "-lname", "-ilname", "-type", "-xtype", "-size", "-mtime", "-mmin", "-atime", "-amin", "-ctime", "-cmin", "-newer", "-anewer", "-cnewer", "-user", "-group", "-uid", "-gid", "-perm", "-maxdepth", "-mindepth", "-printf", "-samefile", "-inum", "-links", "-fstype", "-used", "-context", "-regextype", "-files0-from"]
)
_FIND_FLAG = frozenset(
    ["-print", "-print0", "-ls", "-prune", "-quit", "-true", "-false", "-empty", "-executable", "-readable", "-writable", "-nouser", "-nogroup", "-depth", "-d", "-mount", "-xdev", "-noleaf", "-follow", "-ignore_readdir_race", "-noignore_readdir_race", "-daystart", "-not", "-a", "-and", "-o", "-or", "-help", "--help", "-version", "--version", "-warn", "-nowarn", "!", "(", ")", ","]
)


@register("find")
def _h_find(a: Analyzer, seg: Seg, name: str, args: list[Word]) -> None:
    i = 0
    while i < len(args) and args[i].value in ("-H", "-L", "-P"):
        i += 1
    starts: list[Word] = []
    effects = False
    while i < len(args) and args[i].static and not (args[i].value or "").startswith(("-", "(", "!")):
        starts.append(args[i])
        i += 1
    while i < len(args):
        w = args[i]
        i += 1
        if not w.static:
            a.note(seg, _D, "find: an argument computed at run time could be -delete or -exec")
            return
        v = w.value or ""
        if v == "-delete":
            if any(root_like(s) for s in starts):
                a.flag_destructive("rm-rf-root", "find -delete on a system directory")
            a.note(seg, _D, "find -delete deletes files")
            effects = True
        elif v in ("-exec", "-execdir", "-ok", "-okdir"):
            inner: list[Word] = []
            found = _found_file(args)
            while i < len(args) and args[i].value not in (";", "+"):
                inner.append(found if args[i].value == "{}" else args[i])
                i += 1
            if i >= len(args) or not inner:
                a.note(seg, _D, f"find {v} without a terminated command")
                return
            i += 1
            effects = True
            a.note(seg, _C, f"find {v} runs a command on the files it finds, which may be secret files")
            if v in ("-execdir", "-okdir"):
                a.chdir(None)  # the command runs in each file's directory
            a.command(inner)
        elif v in ("-fprint", "-fprint0", "-fls", "-fprintf"):
            if i < len(args):
                a.write(seg, args[i], f"find {v} writes")
                effects = True
            i += 2 if v == "-fprintf" else 1
        elif v in _FIND_VALUE or re.fullmatch(r"-newer[aBcmt][aBcmt]", v):
            i += 1
        elif v not in _FIND_FLAG:
            a.note(seg, _D, f"find: unknown primary {v}")
            return
    if not effects:
        a.note(seg, _S, "find: read-only")


def _found_file(args: list[Word]) -> Word:
    """The ``{}`` of -exec: a file whose name matches the one -name test, when the
    expression is a plain conjunction; otherwise any path at all."""
    values = [w.value for w in args]
    names = [args[k + 1] for k, v in enumerate(values[:-1]) if v == "-name"]
    if len(names) == 1 and names[0].static and not {"-o", "-or", "!", "-not", ","} & set(values):
        return Word("{}", None, pattern=ANY + "/" + (names[0].value or ""))
    return Word("{}", None)

