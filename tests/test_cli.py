"""The `caisson` command line as a user runs it (real engine, real sessions)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import docker
import jsonschema
import pytest


def caisson(*args: str, state: Path, stdin: str | None = None, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "caisson.interfaces.cli", *args],
        input=stdin, capture_output=True, text=True, timeout=timeout,
        env={**os.environ, "CAISSON_STATE_DIR": str(state)},
    )


def test_replay_runs_a_trajectory_and_keeps_going_past_bad_lines(tmp_path: Path) -> None:
    trajectory = tmp_path / "run.jsonl"
    trajectory.write_text(
        "\n".join(
            [
                json.dumps({"tool": "write_file", "args": {"path": "/workspace/a.py", "content": "print(6 * 7)\n"}}),
                "this is not json",
                json.dumps({"tool": "bash", "args": {"command": "python3 a.py"}}),
                json.dumps({"tool": "edit_file", "args": {"path": "/workspace/a.py", "old_string": "7", "new_string": "8"}}),
                json.dumps({"tool": "bash", "args": {"command": "python3 /workspace/a.py"}}),
                json.dumps({"tool": "delete_file", "args": {"path": "/workspace/a.py"}}),
            ]
        )
        + "\n"
    )
    proc = caisson("replay", str(trajectory), state=tmp_path)
    assert proc.returncode == 0, proc.stderr
    results = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(results) == 6
    # Running code and deleting are dangerous: with no approval handler they are denied.
    assert [r["ok"] for r in results] == [True, False, False, True, False, False]
    assert results[1]["error"]["code"] == "invalid_line" and "line 2" in results[1]["text"]
    assert [r["decision"] for r in results] == ["warn", None, "denied", "warn", "denied", "denied"]

    approved = caisson("replay", "--approve-all", "-", state=tmp_path, stdin=trajectory.read_text())
    results = [json.loads(line) for line in approved.stdout.splitlines()]
    assert [r["ok"] for r in results] == [True, False, True, True, True, True]
    assert results[2]["text"].strip() == "42" and results[4]["text"].strip() == "48"

    audit = caisson("audit", "--tool", "bash", "--limit", "10", state=tmp_path)
    events = [json.loads(line) for line in audit.stdout.splitlines()]
    assert len(events) == 4 and {e["tool"] for e in events} == {"bash"}
    denied = caisson("audit", "--decision", "denied", "--since", "1h", state=tmp_path)
    assert [e["tool"] for e in map(json.loads, denied.stdout.splitlines())] == ["bash", "bash", "delete_file"]


def test_replay_of_a_missing_file_is_one_clear_line(tmp_path: Path) -> None:
    proc = caisson("replay", str(tmp_path / "nope.jsonl"), state=tmp_path)
    assert proc.returncode == 1 and proc.stderr.startswith("caisson: error: cannot read the trajectory file")


@pytest.mark.parametrize("fmt", ["openai", "anthropic", "mcp", "json_schema"])
def test_tools_export_is_valid_json_schema(tmp_path: Path, fmt: str) -> None:
    proc = caisson("tools", "--profile", "amp", "--format", fmt, state=tmp_path)
    assert proc.returncode == 0, proc.stderr
    tools = json.loads(proc.stdout)
    names = set()
    for t in tools:
        key = {"openai": "function", "anthropic": "input_schema", "mcp": "inputSchema"}.get(fmt)
        schema = t["function"]["parameters"] if fmt == "openai" else t[key] if key else t
        jsonschema.Draft202012Validator.check_schema(schema)
        names.add(t["function"]["name"] if fmt == "openai" else t.get("name") or t.get("title"))
    assert {"Read", "Bash", "edit_file", "create_file", "Grep", "glob"} <= names


def test_prompt_and_unknown_profile(tmp_path: Path) -> None:
    proc = caisson("prompt", "--profile", "aar", state=tmp_path)
    assert proc.stdout.startswith("Available tools:\n- read_file:") and "\nGuidelines:\n" in proc.stdout
    bad = caisson("prompt", "--profile", "nope", state=tmp_path)
    assert bad.returncode == 1 and "unknown profile 'nope'" in bad.stderr and "Traceback" not in bad.stderr


def test_image_ls_prune_and_gc(tmp_path: Path) -> None:
    client = docker.from_env()
    current = next(i["tag"] for i in json.loads(caisson("image", "ls", state=tmp_path).stdout) if i["current"])
    client.images.get(current).tag("caisson/sandbox", "stale-test")  # an older build, as after an upgrade
    assert "caisson/sandbox:stale-test" in {i["tag"] for i in json.loads(caisson("image", "ls", state=tmp_path).stdout)}
    # It shares the current image's id, so it is not removed; a distinct old image is.
    old = client.images.build(
        fileobj=io.BytesIO(f"FROM {current}\nLABEL caisson.test=old\n".encode()),
        tag="caisson/sandbox:old-test", rm=True, network_mode="none",
    )[0]
    pruned = json.loads(caisson("image", "prune", state=tmp_path).stdout)
    assert "caisson/sandbox:old-test" in pruned and current not in pruned
    assert old.id not in {i.id for i in client.images.list(name="caisson/sandbox")}
    assert client.images.get(current)
    client.images.remove("caisson/sandbox:stale-test")
    proc = caisson("gc", state=tmp_path)
    assert proc.returncode == 0 and isinstance(json.loads(proc.stdout), list)


@pytest.mark.exclusive  # "nothing left behind" is read from every container of the engine
def test_demo_runs_end_to_end(tmp_path: Path) -> None:
    client = docker.from_env()
    before = {c.id for c in client.containers.list(all=True, sparse=True)}
    proc = caisson("demo", state=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "hello from agent in /workspace" in proc.stdout and "exit code 3" in proc.stdout
    assert "tick 3" in proc.stdout and "timed_out=True" in proc.stdout
    assert "+caisson writes atomically, with CAS" in proc.stdout and "decision=denied" in proc.stdout
    assert {c.id for c in client.containers.list(all=True, sparse=True)} <= before  # nothing left behind


def test_audit_output_cannot_drive_the_terminal(tmp_path: Path) -> None:
    """An agent's arguments reach a human's terminal through `caisson audit`: controls and bidi
    overrides arrive escaped, and the JSON still reads back to what the agent sent."""
    command = "echo \u202etxt.exe\x1b[2J\x07 done\u2028"
    trajectory = json.dumps({"tool": "bash", "args": {"command": command}}) + "\n"
    assert caisson("replay", "-", state=tmp_path, stdin=trajectory).returncode == 0
    audit = caisson("audit", "--tool", "bash", state=tmp_path)
    assert audit.returncode == 0, audit.stderr
    unsafe = [c for c in audit.stdout if c in "\u202e\x1b\x07\u2028"]
    assert unsafe == [] and "\\u202e" in audit.stdout
    assert "\u202etxt.exe" in json.loads(audit.stdout.splitlines()[-1])["preview"]


def test_doctor_reports_every_check(tmp_path: Path) -> None:
    proc = caisson("doctor", state=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = {line.split(":")[0].split()[-1]: line.split()[0] for line in proc.stdout.splitlines() if not line.startswith(" ")}
    assert set(lines) == {"engine", "gvisor", "quota", "image", "landlock", "transport", "spawn"}
    assert lines["engine"] == lines["image"] == "ok"
    assert lines["transport"] == "ok"  # a root controller beside a local engine reaches the socket
    assert lines["spawn"] == "ok"  # this host compiles clone-exec (the test set-up installs gcc)
    # The set-up registers runsc with --network=none: doctor says what that means for a session.
    gvisor = next(line for line in proc.stdout.splitlines() if line.split(":")[0].endswith("gvisor"))
    assert "network=True is refused" in gvisor, gvisor
    # Whatever is not ok comes with what to do about it.
    assert proc.stdout.count("fix:") == sum(1 for status in lines.values() if status != "ok")
