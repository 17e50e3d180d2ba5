"""The environment a call gives its command (the ``env`` argument of bash, exec, run_code):
part of what decides what runs, so part of the decision."""

from __future__ import annotations

from collections.abc import Mapping

from .bash.lexer import NAME_RE
from .bash.programs import STD_BIN_DIRS
from .bash.variables import sensitive_var


def environment_reasons(env: Mapping[str, str]) -> list[tuple[str, str]]:
    """The names in ``env`` that make its command dangerous, each with why (none: it changes
    nothing that runs).

    The names are those that make an assignment in a command line dangerous (loader,
    interpreter start-up, git, shell start-up, pagers and editors, ...). ``PATH`` is
    judged by its value: only the system's own program directories leave the command as
    it is; any other entry (a relative or empty one means the working directory) may hold
    a program the agent wrote.
    """
    reasons = []
    for name in sorted(env):
        if name == "PATH":
            others = [entry or "(empty: the working directory)" for entry in env[name].split(":") if entry not in STD_BIN_DIRS]
            if others:
                reasons.append((name, f"env sets PATH with {others[0]!r}, where programs the agent wrote may be found first"))
        elif NAME_RE.fullmatch(name) is None:
            # Bash defines a function from each exported BASH_FUNC_<name>%% (and other shells
            # their own forms): a name no variable can have is one no command needs.
            reasons.append((name, f"env sets {name!r}, which is no variable name (bash makes functions of such names)"))
        elif sensitive_var(name):
            reasons.append((name, f"env sets {name}, which changes what the command runs or loads"))
    return reasons
