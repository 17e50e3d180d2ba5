"""Shell and environment variables whose value changes what later commands run."""

from __future__ import annotations

import re

from .lexer import NAME_RE, Word

SENSITIVE_VAR_RE = re.compile(
    r"(?:PATH|CDPATH|ENV|BASH_ENV|IFS|PS[0-4]|PROMPT_COMMAND|SHELLOPTS|BASHOPTS|GLOBIGNORE|"
    r"HOME|SHELL|TMPDIR|EDITOR|VISUAL|PAGER|BROWSER|HISTFILE|INPUTRC|FIGNORE|"
    r"LESS\w*|LD_\w+|DYLD_\w+|GIT_\w+|BASH_\w+|PYTHON\w*|NODE_\w+|NPM_CONFIG_\w+|npm_config_\w+|"
    r"PERL\w*|RUBY\w*|JAVA_\w+|_JAVA_\w+|CLASSPATH|XDG_\w+|SSH_\w+|GREP_\w+|RIPGREP_\w+|"
    r"EXECIGNORE|HOSTFILE|MAIL\w*|TERMINFO\w*|\w*_PAGER|\w*_EDITOR|\w*PATH|\w*_OPTS|\w*_OPTIONS|\w*_CONFIG\w*)"
)


def evaluates_subscript(words: list[Word]) -> bool:
    """Whether a test (``test``, ``[``, ``[[``) evaluates an array subscript: ``-v NAME`` and
    ``-R NAME`` take ``a[expr]``, and the subscript is arithmetic, which runs ``$(...)``."""
    for i, w in enumerate(words):
        if w.value in ("-v", "-R") and i + 1 < len(words) and not plain_name(words[i + 1]):
            return True
    # A computed word could be the -v itself.
    return any(not w.static for w in words) and any("[" in w.raw for w in words)


def plain_name(word: Word) -> bool:
    """A variable name without a subscript (a subscript is evaluated as arithmetic)."""
    return word.static and NAME_RE.fullmatch(word.value or "") is not None
