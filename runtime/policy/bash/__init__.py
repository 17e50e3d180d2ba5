"""Static risk classification of bash command lines.

A command line is **safe** only when every part of it is understood and read-only,
**cautious** when the only effect beyond reading is writing inside the workspace, and
**dangerous** otherwise: unknown programs, deletions, network, interpreters, anything
computed at run time that could change what runs, and anything this module cannot parse.
Compound commands take the highest level of their parts. Known-destructive patterns
(``rm -rf /``, ``mkfs``, ``dd if=``, fork bombs, ``curl … | sh`` …) are reported in
``destructive`` so that the policy can refuse them outright.

The tokenizer is our own (no shlex: it does not know ``$( )``, here-documents or ``[[ ]]``).
It follows bash's quoting rules, recurses into command and process substitutions, and
gives up (dangerous) on constructs it does not model: ``case``, function definitions,
``select``, ``coproc``, arithmetic ``for`` and ``(( ))``, array assignments.

bash's own ways of running code count as such: arithmetic on variables (``$(( ))``,
``$[ ]``, ``let``, ``[[ -eq ]]``) and every builtin that evaluates an array subscript
(``test -v``, ``read``, ``unset``, ``printf -v``, ``declare``, ``wait -p``, ``${!x}``), since
a subscript runs ``$(...)``; ``eval``, ``source``, ``exec``, ``command``, ``builtin``,
``jobs -x``, ``trap`` and assignments to ``PROMPT_COMMAND``, ``BASH_ENV`` and the like.

Paths are resolved against the directories the command may run in (the caller's ``cwd``,
then every ``cd``/``pushd`` on the way; an unknown one makes relative writes count as
outside the workspace). A glob or computed word stands for every path it may expand to:
if one of them may be a secret file, reading it is dangerous; if one may be git's machinery
(``.git/**``, hooks), writing it is. Searches that may reach secrets (recursive grep, rg,
git grep, ``find -exec``, xargs, ``git show REV:path``) are cautious, dangerous when their
pattern or options may print the secret. The checks are lexical; symbolic links inside
the container are the container's business (link creation is dangerous).

Where each rule lives: :mod:`.lexer` (quoting, expansions, here-documents), :mod:`.parser`
(lists, pipelines, compound commands), :mod:`.analysis` (substitutions, redirections,
assignments, conditions, how a command gets its level), :mod:`.places` (working
directories, workspace, secret and protected paths), :mod:`.globs` (may a glob match a
policy pattern), :mod:`.commands` (one module per family of commands),
:mod:`.destructive` (patterns refused outright), :mod:`.variables` (variables that change
what runs, subscripts that get evaluated).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..levels import Level
from ..paths import DEFAULT_PROTECTED_PATHS, DEFAULT_SECRET_EXCEPTIONS, DEFAULT_SECRET_PATTERNS, DEFAULT_WORKSPACE_ROOTS
from .analysis import Analyzer
from .commands import HANDLERS
from .destructive import backstop
from .lexer import Lexer, ParseError
from .result import BashClassification, BashSegment

__all__ = ["MAX_COMMAND_LENGTH", "BashClassification", "BashSegment", "check_exec_metacharacters", "classify_bash"]

_S, _D = Level.SAFE, Level.DANGEROUS
MAX_COMMAND_LENGTH = 64 * 1024
MAX_BACKSTOP_LENGTH = 1024 * 1024


def classify_bash(
    command: str,
    *,
    cwd: str | None = None,
    workspace_roots: Sequence[str] = DEFAULT_WORKSPACE_ROOTS,
    secret_patterns: Sequence[str] = DEFAULT_SECRET_PATTERNS,
    secret_exceptions: Sequence[str] = DEFAULT_SECRET_EXCEPTIONS,
    protected_paths: Sequence[str] = DEFAULT_PROTECTED_PATHS,
) -> BashClassification:
    """Classify a bash command line (see the module docstring for the rules)."""
    a = Analyzer(HANDLERS, workspace_roots, secret_patterns, secret_exceptions, protected_paths, cwd)
    parsed = True
    if len(command) > MAX_COMMAND_LENGTH:
        a.effect(_D, f"command too long to analyse ({len(command)} characters)")
        parsed = False
        # The backstop is linear but not free: past MAX_BACKSTOP_LENGTH only the start is
        # scanned (the line is dangerous anyway, so it needs an approval).
        hit = backstop(command[:MAX_BACKSTOP_LENGTH])
        if hit:
            a.flag_destructive(hit, "matched in text that was not analysed")
    elif "\x00" in command:
        a.effect(_D, "command contains a NUL byte")
        parsed = False
    else:
        try:
            tokens = Lexer(command, 0).lex()
            a.run_tokens(tokens)
        except (ParseError, RecursionError) as exc:
            a.reasons.clear()
            a.segments.clear()
            a.residual = _D
            a.reason(f"cannot be parsed ({exc})")
            parsed = False
            hit = backstop(command)
            if hit:
                a.flag_destructive(hit, "matched in text that could not be parsed")
    if a.destructive is not None:
        a.residual = _D
    level = a.level()
    reasons = a.reasons or ([f"{level.value}: nothing to run"] if level is _S else [])
    return BashClassification(
        level=level,
        reasons=reasons,
        destructive=a.destructive,
        segments=a.segments,
        residual=a.residual,
        parsed=parsed,
    )


def check_exec_metacharacters(command: str) -> str | None:
    """Seed 004's shell tool runs one executable without a shell and rejects these before
    execution; returns the rejection message, or None when the command is acceptable."""
    for token in (";", "&&", "|", "`", "$("):
        if token in command:
            return f"Shell metacharacters are not allowed (found {token!r}); run a single executable with arguments."
    return None
