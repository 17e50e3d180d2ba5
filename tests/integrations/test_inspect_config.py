"""The Inspect provider configured from a YAML or JSON file, as Inspect users configure every
other provider; a bad file ends the eval with a message that says what is wrong, not a
traceback. (A file that works, through `--sandbox caisson:FILE`, is in test_inspect_lifecycle.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from caisson.integrations.inspect import CaissonSandboxConfig, SandboxConfigError, load_config_file

TASK = """
from inspect_ai import Task, task
from inspect_ai.dataset import Sample


@task
def configured():
    return Task(dataset=[Sample(input="x")], sandbox="caisson")
"""


def test_yaml_and_json_files_give_the_same_config(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("image: python:3.12\npool: 8\nlimits:\n  memory: 1g\n  pids: 64\n")
    (tmp_path / "a.json").write_text('{"image": "python:3.12", "pool": 8, "limits": {"memory": "1g", "pids": 64}}')
    from_yaml, from_json = load_config_file(str(tmp_path / "a.yaml")), load_config_file(str(tmp_path / "a.json"))
    assert from_yaml == from_json
    assert from_yaml.pool == 8 and from_yaml.limits.pids == 64 and from_yaml.image == "python:3.12"
    assert from_yaml.session_config().tenant == "inspect"


@pytest.mark.parametrize(
    ("name", "text", "says"),
    [
        ("missing.yaml", None, "No such file or directory"),
        ("broken.yaml", "image: [python\n", "is not valid YAML"),
        ("broken.json", '{"image": ', "is not valid JSON"),
        ("list.yaml", "- image: x\n", "holds a list, not a mapping"),
        ("typo.yaml", "imgae: python:3.12\n", "imgae: Extra inputs are not permitted"),
        ("range.yaml", "pool: -1\n", "pool: Input should be greater than or equal to 0"),
    ],
)
def test_a_bad_file_is_refused_with_what_is_wrong(tmp_path: Path, name: str, text: str | None, says: str) -> None:
    if text is not None:
        (tmp_path / name).write_text(text)
    with pytest.raises(SandboxConfigError, match=says) as caught:
        load_config_file(str(tmp_path / name))
    assert name in str(caught.value)


def test_inspect_finds_caisson_yaml_beside_the_task_and_reports_its_fault_plainly(tmp_path: Path) -> None:
    (tmp_path / "task.py").write_text(TASK)
    (tmp_path / "caisson.yaml").write_text("pool: 2\nttl: -5\n")
    run = subprocess.run(
        [str(Path(sys.executable).with_name("inspect")), "eval", "task.py", "--model", "mockllm/model",
         "--log-dir", str(tmp_path / "logs"), "--display", "plain"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )
    out = " ".join((run.stdout + run.stderr).split())  # the console wraps long lines
    assert run.returncode != 0
    # Wrapped anywhere, a long path's name too (a test worker's temporary directory is longer).
    assert "caisson.yaml:ttl:Inputshouldbegreaterthan0" in "".join(out.split()), out
    assert "Traceback" not in out, out


def test_a_config_object_still_works() -> None:
    config = CaissonSandboxConfig(pool=3)
    assert config.session_config().tenant == "inspect" and hash(config) == hash(CaissonSandboxConfig(pool=3))
