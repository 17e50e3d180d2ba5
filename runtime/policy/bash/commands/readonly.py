"""Commands that only read: plain informational commands, file printers (whose operands
are reads, so a secret file makes them dangerous), search tools, sort, jq, tree, date ..."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...levels import Level
from ..argv import getopt
from ..lexer import Word
from .registry import HANDLERS, register, unsure_dangerous

if TYPE_CHECKING:
    from ..analysis import Analyzer, Seg

_S, _C, _D = Level.SAFE, Level.CAUTIOUS, Level.DANGEROUS


_PLAIN = (
    "pwd", "echo", "true", "false", ":", "whoami", "id", "groups", "uname", "arch", "nproc",
    "uptime", "tty", "locale", "printenv", "which", "type", "sleep", "seq", "yes",
    "expr", "basename", "dirname", "realpath", "readlink", "ls", "dir", "vdir", "du", "df", "stat",
    "wc", "ps", "free", "cal", "factor", "getconf", "dirs", "exit", "return",
    "help", "tr", "md5sum", "sha1sum", "sha224sum", "sha256sum", "sha384sum", "sha512sum",
    "b2sum", "cksum", "numfmt", "shift", "logname", "users", "lsb_release",
)


@register(*_PLAIN)
def _h_plain(a: Analyzer, seg: Seg, name: str, args: list[Word]) -> None:
    a.note(seg, _S, f"{name}: read-only")


# Commands whose operands are files they print; reading a secret file this way is dangerous.
_READERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "cat": ("", ()),
    "head": ("nc", ("--lines", "--bytes")),
    "tail": ("ncs", ("--lines", "--bytes", "--sleep-interval", "--pid", "--max-unchanged-stats")),
    "tac": ("s", ("--separator",)),
    "nl": ("bdfhilnpsvw", ()),
    "rev": ("", ()),
    "strings": ("nte", ("--bytes", "--radix", "--encoding")),
    "od": ("AjNSstw", ()),
    "hexdump": ("esnC", ()),
    "base64": ("w", ("--wrap",)),
    "base32": ("w", ("--wrap",)),
    "fold": ("w", ("--width",)),
    "paste": ("d", ("--delimiters",)),
    "join": ("aejot12", ()),
    "comm": ("", ("--output-delimiter",)),
    "diff": ("CUFIxSWDXL", ("--label", "--exclude", "--from-file", "--to-file", "--ignore-matching-lines")),
    "cmp": ("iIn", ()),
    "column": ("cstoNRWHdl", ()),
    "expand": ("t", ("--tabs",)),
    "unexpand": ("t", ("--tabs",)),
    "fmt": ("wpg", ()),
    "cut": ("bcdf", ("--bytes", "--characters", "--delimiter", "--fields", "--output-delimiter")),
}


def _h_reader(a: Analyzer, seg: Seg, name: str, args: list[Word]) -> None:
    short, long_ = _READERS[name]
    argv = getopt(args, short, long_)
    for w in argv.operands:
        if w.value != "-":
            a.read(seg, w)
    if name == "diff" and argv.has("-r", "--recursive"):
        if argv.has("-q", "--brief"):
            a.note(seg, _C, "diff -r may reach secret files (names only with -q)")
        else:
            a.note(seg, _D, "diff -r prints the content of the files it reaches, secret ones included")
    a.note(seg, _S, f"{name}: read-only")


for _reader in _READERS:
    HANDLERS[_reader] = _h_reader


@register("jq")
def _h_jq(a: Analyzer, seg: Seg, name: str, args: list[Word]) -> None:
    argv = getopt(args, "f", ("--from-file", "--indent", "--arg", "--argjson"))
    files = argv.operands if argv.has("-f", "--from-file") else argv.operands[1:]
    for w in files:
        a.read(seg, w)
    a.note(seg, _S, "jq: read-only")


@register("sort")
def _h_sort(a: Analyzer, seg: Seg, name: str, args: list[Word]) -> None:
    argv = getopt(args, "ktoST", ("--key", "--field-separator", "--output", "--buffer-size",
                                    "--temporary-directory", "--compress-program", "--parallel",
                                    "--files0-from", "--batch-size", "--sort", "--random-source"))
    if unsure_dangerous(a, seg, name, argv):
        return
    if argv.has("--compress-program"):
        a.note(seg, _D, "sort --compress-program runs a program")
        return
    for w in argv.values("-o", "--output"):
        a.write(seg, w, "sort -o writes")
    for w in argv.operands:
        a.read(seg, w)
    a.note(seg, _S, "sort: read-only")


@register("uniq", "xxd")
def _h_in_out(a: Analyzer, seg: Seg, name: str, args: list[Word]) -> None:
    """``uniq IN OUT`` and ``xxd IN OUT`` write their second operand."""
    short = "fsw" if name == "uniq" else "cglnosC"
    argv = getopt(args, short, ("--skip-fields", "--skip-chars", "--check-chars", "--group"))
    if unsure_dangerous(a, seg, name, argv):
        return
    if argv.operands:
        a.read(seg, argv.operands[0])
    for w in argv.operands[1:2]:
        a.write(seg, w, f"{name} writes its output to")
    a.note(seg, _S, f"{name}: read-only")


@register("tree")
def _h_tree(a: Analyzer, seg: Seg, name: str, args: list[Word]) -> None:
    argv = getopt(args, "LPIoHT", ("--charset", "--filelimit", "--timefmt", "--sort", "--fromfile"))
    if unsure_dangerous(a, seg, name, argv):
        return
    for w in argv.values("-o"):
        a.write(seg, w, "tree -o writes")
    a.note(seg, _S, "tree: read-only")


@register("file")
def _h_file(a: Analyzer, seg: Seg, name: str, args: list[Word]) -> None:
    argv = getopt(args, "mfFeP", ("--magic-file", "--files-from", "--separator", "--exclude", "--parameter"))
    if argv.has("-C", "--compile") or unsure_dangerous(a, seg, name, argv):
        a.note(seg, _D, "file -C writes a compiled magic file")
        return
    a.note(seg, _S, "file: read-only")


@register("date")
def _h_date(a: Analyzer, seg: Seg, name: str, args: list[Word]) -> None:
    argv = getopt(args, "dfrI", ("--date", "--file", "--reference"))
    if unsure_dangerous(a, seg, name, argv):
        return
    if argv.has("-s", "--set"):
        a.note(seg, _D, "date --set changes the clock")
        return
    for w in argv.values("-f", "--file"):
        a.read(seg, w)  # lines that are not dates are printed in the error
    a.note(seg, _S, "date: read-only")


@register("hostname")
def _h_hostname(a: Analyzer, seg: Seg, name: str, args: list[Word]) -> None:
    argv = getopt(args, "F", ("--file",))
    if argv.operands or argv.has("-F", "--file", "-b", "--boot"):
        a.note(seg, _D, "hostname with an argument sets the host name")
        return
    a.note(seg, _S, "hostname: read-only")


