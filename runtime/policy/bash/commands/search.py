"""Search tools (grep, rg, and git grep through :func:`search`): what they print depends on
the pattern, so a search that may reach a secret file is cautious, and dangerous when its
pattern looks for secrets, matches almost anything, or the output shows more than matches."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ...levels import Level
from ..argv import Argv, getopt
from ..lexer import Word
from .registry import register

if TYPE_CHECKING:
    from ..analysis import Analyzer, Seg

_S, _C, _D = Level.SAFE, Level.CAUTIOUS, Level.DANGEROUS

# Patterns that look for credentials.
SECRET_WORDS_RE = re.compile(
    r"(?i)pass|pwd|secret|token|api.?key|private|credential|auth|bearer|aws|access.?key|session|cookie|"
    r"BEGIN|ssh-|(?:^|[^a-z])key|key(?:$|[^a-z])|\benv\b|\.env"
)
# Output that names files or counts matches, never shows a line.
_NAMES_ONLY = ("-l", "-L", "-c", "-q", "--files-with-matches", "--files-without-match", "--count", "--quiet",
               "--silent", "--files", "--count-matches")
# Output that shows lines the pattern did not pick.
_WIDENING = ("-v", "--invert-match", "-A", "-B", "-C", "--after-context", "--before-context", "--context",
             "--passthru", "--passthrough", "-f", "--file")


def reveals(argv: Argv, patterns: list[Word]) -> bool:
    """Whether a search may print secret content from the files it reaches."""
    if argv.has(*_NAMES_ONLY):
        return False
    if argv.has(*_WIDENING) or any(re.fullmatch(r"-\d+", o) for o, _ in argv.opts):
        return True
    if not patterns:
        return True
    for p in patterns:
        if p.value is None or SECRET_WORDS_RE.search(p.value):
            return True
        # Without a run of three literal characters a pattern matches nearly every line.
        if not re.search(r"[A-Za-z0-9_]{3}", re.sub(r"\\.|\[[^\]]*\]", "", p.value)):
            return True
    return False


def search(
    a: Analyzer, seg: Seg, name: str, argv: Argv, patterns: list[Word], files: list[Word], *, recursive: bool
) -> None:
    shows = reveals(argv, patterns)
    for f in argv.values("-f", "--file"):
        a.read(seg, f)
    for w in files:
        if w.value != "-":
            a.read(seg, w, reveals=shows)
    if recursive or argv.unsure:
        if shows:
            a.note(seg, _D, f"{name}: a recursive search that may print secret files (pattern or options show them)")
        else:
            a.note(seg, _C, f"{name}: a recursive search may reach secret files")
    a.note(seg, _S, f"{name}: read-only search")


_RG_VALUES = (
    "--regexp", "--file", "--glob", "--iglob", "--type", "--type-not", "--max-count",
    "--after-context", "--before-context", "--context", "--max-columns", "--threads",
    "--replace", "--encoding", "--max-depth", "--max-filesize", "--sort", "--sortr",
    "--type-add", "--color", "--colors", "--path-separator", "--engine", "--pre", "--pre-glob",
)
_GREP_VALUES = (
    "--regexp", "--file", "--max-count", "--after-context", "--before-context", "--context",
    "--include", "--exclude", "--exclude-dir", "--label", "--binary-files", "--devices",
    "--directories", "--color", "--colour", "--exclude-from",
)


@register("grep", "egrep", "fgrep", "rg")
def _h_grep(a: Analyzer, seg: Seg, name: str, args: list[Word]) -> None:
    if name == "rg":
        argv = getopt(args, "eEfgjmABCMtTr", _RG_VALUES)
        if argv.unsure:
            a.note(seg, _D, "rg: an argument computed at run time could be an option that runs a program (--pre)")
            return
        if argv.has("--pre", "--pre-glob"):
            a.note(seg, _D, "rg --pre runs a program on every file")
            return
        recursive = True
    else:
        argv = getopt(args, "efmABCdD", _GREP_VALUES)
        recursive = argv.has("-r", "-R", "--recursive", "--dereference-recursive") or any(
            (w.value or "").startswith("recurse") for w in argv.values("-d", "--directories")
        )
    explicit = argv.has("-e", "--regexp", "-f", "--file")
    patterns = argv.values("-e", "--regexp") if explicit else argv.operands[:1]
    files = argv.operands if explicit else argv.operands[1:]
    search(a, seg, name, argv, patterns, files, recursive=recursive)
