"""The env argument's names and PATH entries, as the policy judges them."""

from __future__ import annotations

import pytest

from caisson.policy.environment import environment_reasons


@pytest.mark.parametrize(
    "env",
    [
        {"LD_PRELOAD": "/workspace/x.so"}, {"LD_LIBRARY_PATH": "/workspace"}, {"LD_AUDIT": "x.so"},
        {"PYTHONPATH": "/workspace"}, {"PYTHONSTARTUP": "/workspace/s.py"}, {"PYTHONWARNINGS": "ignore::evil.W"},
        {"PERL5LIB": "/workspace"}, {"PERL5OPT": "-Mevil"}, {"NODE_OPTIONS": "--require /workspace/x.js"},
        {"RUBYOPT": "-revil"}, {"GIT_CONFIG_COUNT": "1"}, {"GIT_EXTERNAL_DIFF": "x"}, {"GIT_DIR": "x.git"},
        {"BASH_ENV": "/workspace/rc"}, {"ENV": "/workspace/rc"}, {"PROMPT_COMMAND": "x"}, {"HOME": "/workspace"},
        {"XDG_CONFIG_HOME": "/workspace"}, {"OPENSSL_CONF": "/workspace/o.cnf"}, {"MANPAGER": "x"},
        {"LESSOPEN": "|x %s"}, {"JAVA_TOOL_OPTIONS": "-javaagent:x"}, {"GOFLAGS": "-toolexec=x"},
        {"PATH": "/workspace/bin:/usr/bin"}, {"PATH": "bin:/usr/bin"}, {"PATH": ":/usr/bin"}, {"PATH": "/usr/bin:"},
        {"PATH": "/usr/bin/../../workspace/bin"}, {"PATH": "/home/agent/.local/bin:/usr/bin"},
        # Bash makes a function of each exported BASH_FUNC_<name>%%: no variable has such a name.
        {"BASH_FUNC_ls%%": "() { cat .env; }"}, {"BASH_FUNC_cd()": "() { :; }"}, {"ls-x": "y"},
    ],
)
def test_what_changes_what_runs_is_named(env: dict[str, str]) -> None:
    found = environment_reasons(env)
    assert [name for name, _ in found] == list(env)


@pytest.mark.parametrize(
    "env",
    [{}, {"LANG": "C.UTF-8"}, {"DEBUG": "1", "CI": "true"}, {"NODE_ENV": "test"}, {"PYTHONUNBUFFERED": "1"},
     {"GIT_AUTHOR_NAME": "a", "GIT_COMMITTER_EMAIL": "a@b"}, {"PATH": "/usr/local/bin:/usr/bin:/bin"}],
)
def test_ordinary_variables_change_nothing(env: dict[str, str]) -> None:
    assert environment_reasons(env) == []
