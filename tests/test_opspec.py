"""Each daemon op is declared once (``sandbox/opspec.py``): the daemon dispatches exactly the
declared ops, the host's client has a method for each and sends what the declaration allows,
its reply models read declared fields, and docs/protocol.md's tables are the declaration's."""

from __future__ import annotations

import ast
import inspect
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from caisson._sandbox import opspec
from caisson._sandbox.errors import DaemonError
from caisson._sandbox.server import build_ops
from caisson.client import models
from caisson.client.primitives import SandboxClient
from caisson.transport.channel import Channel

ROOT = Path(__file__).resolve().parents[1]

# The client method that sends each op (cancel is the channel's: it sends it when a caller gives up).
METHODS: dict[str, Any] = {
    "ping": SandboxClient.ping,
    "stat": SandboxClient.stat,
    "read": SandboxClient.read_range,
    "write": SandboxClient.write_file,
    "list": SandboxClient.list_dir,
    "walk": SandboxClient.walk,
    "mkdir": SandboxClient.mkdir,
    "remove": SandboxClient.remove,
    "rename": SandboxClient.rename,
    "exec": SandboxClient.exec,
    "spawn": SandboxClient.spawn,
    "task_read": SandboxClient.task_read,
    "task_write": SandboxClient.task_write,
    "task_signal": SandboxClient.task_signal,
    "task_wait": SandboxClient.task_wait,
    "task_forget": SandboxClient.task_forget,
    "task_list": SandboxClient.task_list,
    "net_listen": SandboxClient.net_listen,
    "net_accept": SandboxClient.net_accept,
    "net_read": SandboxClient.net_read,
    "net_write": SandboxClient.net_write,
    "net_close": SandboxClient.net_close,
    "grep": SandboxClient.grep,
    "find": SandboxClient.find,
    "cancel": Channel._cancel,
}

# Each reply model, what part of the reply it reads (None: the result itself, else a list of
# objects in it), and its fields the client fills from the blob rather than the result.
REPLY_MODELS: list[tuple[str, str | None, type[BaseModel], set[str]]] = [
    ("ping", None, models.DaemonInfo, set()),
    ("stat", None, models.StatResult, {"head"}),
    ("read", None, models.ReadResult, {"data"}),
    ("write", None, models.WriteResult, {"old"}),
    ("list", "entries", models.DirEntry, set()),
    ("walk", None, models.WalkResult, set()),
    ("walk", "entries", models.WalkEntry, set()),
    ("exec", None, models.ExecResult, {"stdout", "stderr"}),
    ("spawn", None, models.SpawnResult, set()),
    ("task_read", None, models.TaskOutput, {"stdout", "stderr"}),
    ("task_wait", None, models.TaskOutput, {"stdout", "stderr"}),
    ("task_list", "tasks", models.TaskInfo, set()),
    ("net_read", None, models.NetRead, {"data"}),
    ("grep", None, models.GrepResult, set()),
    ("grep", "files", models.GrepFile, set()),
    ("find", None, models.FindResult, set()),
]

# Where a client method's default differs from the daemon's on purpose.
OWN_DEFAULTS = {
    ("exec", "timeout"): "a library call without a timeout gets 60 s, not forever",
    ("write", "mode"): "None: the daemon's default for a new file, the old mode for an existing one",
}


def test_the_daemon_dispatches_exactly_the_declared_ops() -> None:
    assert set(build_ops()) == set(opspec.SPEC)
    assert len(opspec.SPEC) == len(opspec.OPS) == 25


def test_every_op_has_a_client_method_that_sends_it() -> None:
    assert set(METHODS) == set(opspec.SPEC)
    for op, method in METHODS.items():
        assert f'"{op}"' in inspect.getsource(method), f"{method.__qualname__} does not send {op}"


def test_client_defaults_are_the_declared_ones() -> None:
    compared = 0
    for op, method in METHODS.items():
        declared = {arg.name: arg for arg in opspec.SPEC[op].args}
        for name, param in inspect.signature(method).parameters.items():
            arg = declared.get(name)
            if arg is None or param.default is inspect.Parameter.empty or param.default is None:
                continue
            if (op, name) in OWN_DEFAULTS:
                assert param.default != arg.default
                continue
            default = tuple(param.default) if isinstance(param.default, list) else param.default
            assert default == arg.default, f"{method.__qualname__}({name}={param.default!r}), declared {arg.default!r}"
            compared += 1
    assert compared >= 30  # the comparison ran over real signatures


def test_reply_models_read_declared_fields() -> None:
    for op, part, model, from_blob in REPLY_MODELS:
        results = {out.name: out for out in opspec.SPEC[op].results}
        declared = set(results) if part is None else set(results[part].fields)
        unknown = set(model.model_fields) - from_blob - declared
        assert not unknown, f"{model.__name__} reads {sorted(unknown)}, which {op} does not declare"


def test_protocol_doc_tables_are_generated_from_the_declaration() -> None:
    check = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "protocol_tables.py"), "--check"], capture_output=True, text=True
    )
    assert check.returncode == 0, check.stderr
    doc = (ROOT / "docs" / "protocol.md").read_text()
    for op in opspec.OPS:
        assert f"### `{op.name}`" in doc
        for arg in op.args:
            assert f"| `{arg.name}` | {arg.kind} |" in doc


def test_nothing_outside_the_client_sends_raw_requests() -> None:
    # Typed methods only: a request dict built elsewhere is a fifth copy of an op's shape.
    found = []
    for path in (ROOT / "runtime").rglob("*.py"):
        if "_sandbox" in path.parts or path.parent.name == "client":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            called = node.func
            on_channel = called.attr == "call" and isinstance(called.value, ast.Attribute) and called.value.attr == "channel"
            if called.attr == "op" or on_channel:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == []


def refusal(op: str, args: dict[str, Any]) -> str:
    with pytest.raises(DaemonError) as err:
        opspec.parse(op, args)
    assert err.value.code == "bad_request"
    return err.value.message


def test_wrong_arguments_get_one_error_built_from_the_declaration() -> None:
    usage = "usage: read(path: string, offset: integer = 0, length: integer = -1, "
    assert refusal("read", {"path": "/a", "offest": 1}).startswith("read: unknown argument 'offest'; " + usage)
    assert refusal("read", {"offset": 1}).startswith("read: missing argument 'path' (a string); " + usage)
    assert refusal("read", {"path": None}).startswith("read: missing argument 'path'")
    assert refusal("read", {"path": "/a", "offset": "1"}).startswith(
        "read: argument 'offset' must be an integer, not a string; " + usage
    )
    assert refusal("read", {"path": "/a", "offset": True}).startswith(
        "read: argument 'offset' must be an integer, not a boolean"
    )
    assert refusal("read", {"path": "/a", "offset": -1}).startswith("read: argument 'offset' is -1, out of at least 0")
    assert refusal("task_read", {"task_id": "t1", "wait": math.nan}).startswith("task_read: argument 'wait' is nan")
    assert refusal("task_wait", {"task_id": "t1", "timeout": math.inf}).startswith("task_wait: argument 'timeout'")
    assert refusal("grep", {"root": "/", "pattern": "x", "mode": "lines"}).startswith(
        "grep: argument 'mode' is \"lines\", not one of \"content\", \"files\", \"count\""
    )
    assert refusal("exec", {"command": "true", "Confine": {"level": "safe"}}).startswith(
        "exec: unknown argument 'Confine'"
    )
    assert refusal("frobnicate", {}).startswith("unknown op 'frobnicate'; the ops are cancel, exec, find")


def test_parse_fills_every_declared_argument() -> None:
    full = opspec.parse("read", {"path": "/a", "length": None})
    assert full == {
        "path": "/a", "offset": 0, "length": -1, "max_bytes": None, "hash": False, "max_size": None,
        "plain": False, "as_user": None, "roots": None, "decided": None,
    }
    assert opspec.parse("task_read", {"task_id": "t1", "wait": 2})["wait"] == 2
    # Defaults are shared by every request: none may be changed in place.
    for op in opspec.OPS:
        for arg in op.args:
            assert isinstance(arg.default, (str, int, float, tuple, type(None), type(opspec.REQUIRED))), arg
