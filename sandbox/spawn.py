"""What a command is: its spec (argv, cwd, environment, user, confinement), parsed from a
request (``spawner`` starts it).
"""

import os
import shlex
import shutil
from typing import Any, Dict, List, NamedTuple, Optional

from .errors import DaemonError, get
from .landlock import Confine, parse_confine
from .users import UserInfo, configure_agent, resolve_user

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class _Config:
    """Set by configure() at daemon start (from CAISSON_AGENT_USER, CAISSON_WORKSPACE)."""

    agent_user = "agent"
    workspace = "/workspace"
    shell = shutil.which("bash") or "/bin/sh"


config = _Config()
_env_cache: Dict[int, Dict[str, str]] = {}  # uid -> base environment
# The daemon's own start-up environment is the image's ENV; these are ours or the shell's, not the image's.
_ENV_DROP = ("PWD", "OLDPWD", "SHLVL", "_")


def configure(agent_user: str, workspace: str) -> None:
    config.agent_user = agent_user
    config.workspace = workspace
    config.shell = shutil.which("bash") or "/bin/sh"
    configure_agent(agent_user, workspace)
    _env_cache.clear()


def agent_identity() -> UserInfo:
    """The configured agent user; without a passwd entry, uid/gid 1000 (as images commonly use)."""
    return resolve_user(config.agent_user)


# Where this package was imported from: the host puts it on PYTHONPATH to start us,
# but agent code must not import our ``sandbox`` in place of its own.
_OWN_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _without_own_path(pythonpath: str) -> str:
    return os.pathsep.join(p for p in pythonpath.split(os.pathsep) if p and os.path.abspath(p) != _OWN_PARENT)


def base_env(user: UserInfo) -> Dict[str, str]:
    env = _env_cache.get(user.uid)
    if env is None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CAISSON_") and k not in _ENV_DROP}
        if "PYTHONPATH" in env:
            env["PYTHONPATH"] = _without_own_path(env["PYTHONPATH"])
            if not env["PYTHONPATH"]:
                del env["PYTHONPATH"]
        env["HOME"] = user.home
        env["USER"] = user.name
        env["LOGNAME"] = user.name
        env.setdefault("PATH", DEFAULT_PATH)
        _env_cache[user.uid] = env
    return env


class Spec(NamedTuple):
    argv: List[str]
    executable: Optional[str]
    display: str
    cwd: str
    env: Dict[str, str]
    user: UserInfo
    confine: Optional[Confine] = None
    cwd_fd: int = -1  # a directory descriptor of the daemon's to start in, in place of cwd


def parse_spec(args: Dict[str, Any]) -> Spec:
    argv = get(args, "argv", list, None)
    command = get(args, "command", str, None)
    if (argv is None) == (command is None):
        raise DaemonError("bad_request", "give exactly one of argv and command")
    executable = None
    if argv is not None:
        if not argv or not all(isinstance(a, str) for a in argv):
            raise DaemonError("bad_request", "argv must be a non-empty list of strings")
        display = shlex.join(argv)
    else:
        argv = [os.path.basename(config.shell), "-c", command]
        executable = config.shell
        display = command
    if any("\0" in a for a in argv):
        raise DaemonError("bad_request", "argv contains a NUL byte")
    cwd = get(args, "cwd", str, config.workspace)
    if not cwd.startswith("/"):
        raise DaemonError("bad_request", "cwd must be an absolute path")
    if not os.path.isdir(cwd):
        if os.path.lexists(cwd):
            raise DaemonError("cwd_not_found", "cwd is not a directory: %s" % cwd)
        raise DaemonError("cwd_not_found", "cwd does not exist: %s" % cwd)
    user_arg = args.get("user")
    user = agent_identity() if user_arg is None else resolve_user(user_arg)
    env = base_env(user)
    extra = get(args, "env", dict, None)
    if extra:
        env = dict(env)
        for key, value in extra.items():
            if not key or "=" in key or "\0" in key:
                raise DaemonError("bad_request", "bad environment variable name %r" % key)
            if value is None:
                env.pop(key, None)  # null unsets a variable of the base environment
            elif isinstance(value, str) and "\0" not in value:
                env[key] = value
            else:
                raise DaemonError("bad_request", "environment value of %s must be a string or null" % key)
    return Spec(argv, executable, display, cwd, env, user, parse_confine(args.get("confine")))

