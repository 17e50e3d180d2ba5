"""Shell and environment variables whose value changes what later commands run."""

from __future__ import annotations

import re

SENSITIVE_VAR_RE = re.compile(
    r"(?:PATH|CDPATH|ENV|BASH_ENV|IFS|PS[0-4]|PROMPT_COMMAND|SHELLOPTS|BASHOPTS|GLOBIGNORE|"
    r"HOME|SHELL|TMPDIR|EDITOR|VISUAL|PAGER|BROWSER|HISTFILE|INPUTRC|FIGNORE|"
    r"LESS\w*|LD_\w+|DYLD_\w+|GIT_\w+|BASH_\w+|PYTHON\w*|NODE_\w+|NPM_CONFIG_\w+|npm_config_\w+|"
    r"PERL\w*|RUBY\w*|JAVA_\w+|_JAVA_\w+|CLASSPATH|XDG_\w+|SSH_\w+|GREP_\w+|RIPGREP_\w+|"
    r"\w*_PAGER|\w*_EDITOR|\w*PATH|\w*_OPTS|\w*_OPTIONS|\w*_CONFIG\w*)"
)
