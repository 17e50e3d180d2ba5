"""Text-processing languages whose scripts are checked: sed (no e/w/r commands) and awk (no
system, getline, print redirections)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ...levels import Level
from ..argv import getopt, opt_is
from ..lexer import Word
from .registry import register, unsure_dangerous

if TYPE_CHECKING:
    from ..analysis import Analyzer, Seg

_S, _C, _D = Level.SAFE, Level.CAUTIOUS, Level.DANGEROUS


@register("sed")
def _h_sed(a: Analyzer, seg: Seg, name: str, args: list[Word]) -> None:
    # "-i[SUFFIX]" swallows the rest of its bundle as a suffix, so take it out before getopt.
    in_place = False
    plain: list[Word] = []
    for w in args:
        m = re.fullmatch(r"-([nEsuzr]*)i.*", w.value or "") if w.static else None
        if m:
            in_place = True
            if m.group(1):
                plain.append(Word("-" + m.group(1), "-" + m.group(1)))
        else:
            plain.append(w)
    argv = getopt(plain, "efl", ("--expression", "--file", "--line-length"))
    if unsure_dangerous(a, seg, name, argv):
        return
    known = {"-n", "--quiet", "--silent", "-E", "-r", "--regexp-extended", "-s", "--separate",
             "-u", "--unbuffered", "-z", "--null-data", "--posix", "--debug", "-e", "--expression",
             "-l", "--line-length", "--sandbox", "--follow-symlinks", "-c"}
    for opt, _ in argv.opts:
        if opt_is(opt, "--in-place"):
            in_place = True
        elif opt in ("-f", "--file") or opt_is(opt, "--file"):
            a.note(seg, _D, "sed -f: script from a file cannot be checked")
            return
        elif opt not in known and not any(opt_is(opt, k) for k in known if k.startswith("--")):
            a.note(seg, _D, f"sed: unknown option {opt}")
            return
    scripts = argv.values("-e", "--expression")
    files = argv.operands
    if not scripts:
        if not files:
            a.note(seg, _D, "sed without a script")
            return
        scripts, files = [files[0]], files[1:]
    for script in scripts:
        if script.value is None or not _sed_script_safe(script.value):
            a.note(seg, _D, "sed: script can execute or write files (e, w, r …) or could not be checked")
            return
    for w in files:
        if in_place:
            a.write(seg, w, "sed -i edits")
        else:
            a.read(seg, w)
    if not in_place:
        a.note(seg, _S, "sed: read-only")


def _sed_script_safe(script: str) -> bool:
    # A bracket expression may or may not end an s/// part depending on the sed; accept the
    # script only if it is safe under both readings.
    return _sed_parse(script, brackets=False) and _sed_parse(script, brackets=True)


def _sed_parse(s: str, *, brackets: bool) -> bool:
    n = len(s)
    i = 0

    def delimited(i: int, delim: str) -> int:
        """Index after the closing delimiter of a part starting at i, or -1."""
        while i < n:
            c = s[i]
            if c == "\\":
                i += 2
                continue
            if brackets and c == "[":
                j = i + 1
                if j < n and s[j] == "^":
                    j += 1
                if j < n and s[j] == "]":
                    j += 1
                close = s.find("]", j)
                if close < 0:
                    return -1
                i = close + 1
                continue
            if c == delim:
                return i + 1
            if c == "\n":
                return -1
            i += 1
        return -1

    def address(i: int) -> int:
        if i < n and s[i] == "$":
            return i + 1
        m = re.match(r"[0-9]+(?:~[0-9]+)?", s[i:])
        if m:
            return i + m.end()
        if i < n and s[i] in "/\\":
            delim = s[i] if s[i] == "/" else (s[i + 1] if i + 1 < n else "")
            start = i + 1 if s[i] == "/" else i + 2
            if not delim:
                return -1
            j = delimited(start, delim)
            if j < 0:
                return -1
            while j < n and s[j] in "IM":
                j += 1
            return j
        return i

    while i < n:
        while i < n and s[i] in " \t\n;":
            i += 1
        if i >= n:
            break
        j = address(i)
        if j < 0:
            return False
        if j > i and j < n and s[j] == ",":
            k = j + 1
            if k < n and s[k] in "+~":
                m = re.match(r"[+~][0-9]+", s[k:])
                j = k + m.end() if m else -1
            else:
                j = address(k)
                if j == k:
                    return False
            if j < 0:
                return False
        i = j
        while i < n and s[i] in " \t":
            i += 1
        if i < n and s[i] == "!":
            i += 1
            while i < n and s[i] in " \t":
                i += 1
        if i >= n:
            return False
        c = s[i]
        if c in "pdDnNgGhHxlPz=}{":
            i += 1
        elif c in "qQ":
            i += 1
            m = re.match(r"\s*[0-9]*", s[i:])
            i += m.end() if m else 0
        elif c in "aic":
            # Text commands only print; the text runs to the end of the line.
            end = s.find("\n", i)
            i = n if end < 0 else end
        elif c in "btT:":
            label_end = re.search(r"[;\n]", s[i:])
            i = n if label_end is None else i + label_end.start()
        elif c == "#":
            end = s.find("\n", i)
            i = n if end < 0 else end
        elif c in "sy":
            if i + 1 >= n or s[i + 1] in "\\\n":
                return False
            delim = s[i + 1]
            j = delimited(i + 2, delim)
            if j < 0:
                return False
            j = delimited(j, delim)
            if j < 0:
                return False
            if c == "s":
                while j < n and s[j] in "gpiImM0123456789":
                    j += 1
            i = j
            while i < n and s[i] in " \t":
                i += 1
            if i < n and s[i] not in ";\n}":
                return False
        else:
            # w, W, r, R, e, F, v and anything unknown.
            return False
    return True


@register("awk", "gawk", "mawk", "nawk")
def _h_awk(a: Analyzer, seg: Seg, name: str, args: list[Word]) -> None:
    argv = getopt(args, "Fvf", ("--field-separator", "--assign", "--file"))
    if unsure_dangerous(a, seg, name, argv):
        return
    if argv.has("-f", "--file") or not argv.operands:
        a.note(seg, _D, f"{name}: program from a file cannot be checked")
        return
    for opt, _ in argv.opts:
        if opt not in ("-F", "-v", "--field-separator", "--assign", "--"):
            a.note(seg, _D, f"{name}: option {opt}")
            return
    program = argv.operands[0].value or ""
    # Output redirection and pipes only exist in print/printf statements ("NR > 1" is a test).
    if re.search(r"system|getline|close|fflush|@|\|&|\b(?:print|printf)\b[^;{}\n]*[>|]", program):
        a.note(seg, _D, f"{name}: program may run commands or write files (system, print >, print |, getline)")
        return
    for w in argv.operands[1:]:
        if not re.match(r"[A-Za-z_][A-Za-z0-9_]*=", w.value or ""):
            a.read(seg, w)
    a.note(seg, _S, f"{name}: read-only")
