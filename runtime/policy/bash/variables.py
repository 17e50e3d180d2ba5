"""Shell and environment variables whose value changes what later commands run."""

from __future__ import annotations

import re

from .lexer import NAME_RE, Word

SENSITIVE_VAR_RE = re.compile(
    r"(?:PATH|CDPATH|ENV|BASH_ENV|IFS|PS[0-4]|PROMPT_COMMAND|SHELLOPTS|BASHOPTS|GLOBIGNORE|"
    r"HOME|SHELL|TMPDIR|EDITOR|VISUAL|PAGER|BROWSER|HISTFILE|INPUTRC|FIGNORE|"
    r"LESS\w*|LD_\w+|DYLD_\w+|GIT_\w+|BASH_\w+|PYTHON\w*|NODE_\w+|NPM_CONFIG_\w+|npm_config_\w+|"
    r"PERL\w*|RUBY\w*|JAVA_\w+|_JAVA_\w+|CLASSPATH|XDG_\w+|SSH_\w+|GREP_\w+|RIPGREP_\w+|"
    r"EXECIGNORE|HOSTFILE|MAIL\w*|TERMINFO\w*|TERMCAP|\w*PAGER|\w*EDITOR|\w*PATH|\w*_OPTS?|\w*_OPTIONS|"
    r"\w*_CONFIG\w*|\w*_COMMAND|\w*_CMD|\w*ASKPASS|"
    # Programs that load code or configuration named by these: OpenSSL engines, glibc, Lua,
    # Tcl, Ruby gems, PHP, R, vim, zsh, gpg, gcc, make, Go, Rust, Docker, Kubernetes, Mercurial.
    r"OPENSSL_\w+|GLIBC_TUNABLES|MALLOC_\w+|LUA_\w+|TCL\w*|GEM_\w+|BUNDLE_\w+|PHPRC|PHP_\w+|"
    r"R_PROFILE\w*|R_ENVIRON\w*|R_LIBS\w*|VIMINIT|EXINIT|MYVIMRC|VIMRUNTIME|ZDOTDIR|GNUPGHOME|GCC_EXEC_PREFIX|"
    r"MAKEFLAGS|MFLAGS|GO(?:FLAGS|ENV|TOOLCHAIN|ROOT)|CARGO_\w+|RUSTC\w*|RUST(?:DOC)?FLAGS|DOCKER_\w+|"
    r"KUBECONFIG|HG\w+|WGETRC|CURL_HOME|PIP_\w+|YARN_\w+|DOTNET_\w+)"
)

# Names the pattern above covers that only tune output or identity, never what runs or loads.
HARMLESS_VARS = frozenset({
    "NODE_ENV", "PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE", "PYTHONIOENCODING", "PYTHONHASHSEED", "PYTHONUTF8",
    "GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_AUTHOR_DATE", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL",
    "GIT_COMMITTER_DATE", "GIT_TERMINAL_PROMPT",
})


def sensitive_var(name: str) -> bool:
    """Whether setting ``name`` may change what a later command runs or loads."""
    return name not in HARMLESS_VARS and SENSITIVE_VAR_RE.fullmatch(name) is not None


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
