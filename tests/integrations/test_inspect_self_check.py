"""Inspect AI's own conformance suite for sandbox providers, run against the caisson provider
Inspect finds through its entry point, through its lifecycle (task_init, sample_init, ...,
task_cleanup) on a real engine; and the same suite again from the installed wheel."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator
from importlib.metadata import entry_points
from pathlib import Path

import pytest
from inspect_ai.util import SandboxEnvironment
from inspect_ai.util._sandbox import self_check
from inspect_ai.util._sandbox.registry import registry_find_sandboxenv
from inspect_ai.util._sandbox.self_check import *  # noqa: F403  (the suite's 44 checks)

import caisson
from caisson.integrations.inspect import CaissonSandboxEnvironment

pytestmark = pytest.mark.anyio

TASK = "caisson-self-check"
ROOT = Path(__file__).resolve().parents[2]
# Set in the run from the wheel: where the installed caisson must come from.
WHEEL_SITE = "CAISSON_SELF_CHECK_SITE"


@pytest.fixture(scope="module")
async def sample(anyio_backend: str) -> AsyncIterator[dict[str, SandboxEnvironment]]:
    # The class Inspect loads for sandbox="caisson", as an eval does.
    provider = registry_find_sandboxenv("caisson")
    await provider.task_init(TASK, None)
    envs = await provider.sample_init(TASK, None, {})
    try:
        yield envs
    finally:
        await provider.sample_cleanup(TASK, None, envs, False)
        await provider.task_cleanup(TASK, None, True)


@pytest.fixture
async def sandbox_env(sample: dict[str, SandboxEnvironment]) -> SandboxEnvironment:
    return sample["default"]


def test_the_whole_suite_is_collected() -> None:
    assert len(self_check.__all__) == 44
    assert all(name in globals() for name in self_check.__all__)


def test_inspect_finds_the_provider_by_name() -> None:
    # The installed package declares the entry point Inspect loads for `sandbox="caisson"`.
    declared = {ep.name: ep.value for ep in entry_points(group="inspect_ai")}
    assert declared.get("caisson") == "caisson.integrations.inspect"
    assert registry_find_sandboxenv("caisson") is CaissonSandboxEnvironment


def test_the_provider_is_the_installed_caisson() -> None:
    site = os.environ.get(WHEEL_SITE)
    provider = registry_find_sandboxenv("caisson")
    assert provider.__module__ == "caisson.integrations.inspect"
    if site:
        assert caisson.__file__ is not None and caisson.__file__.startswith(site), caisson.__file__


def test_the_suite_passes_from_the_installed_wheel(tmp_path: Path) -> None:
    """Built into a wheel and installed into a fresh environment (Inspect and pytest reached
    from this one's site-packages, which holds no caisson import package of its own: this
    checkout is installed there as an editable finder, which a path added this way does not
    run), the suite runs from a directory outside the checkout."""
    if os.environ.get(WHEEL_SITE):
        pytest.fail("this test runs the module again from the wheel: the run from the wheel deselects it")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT)], check=True)
    [wheel] = tmp_path.glob("caisson_runtime-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    site = next((venv / "lib").glob("python3*/site-packages"))
    here = next(p for p in sys.path if p.endswith("site-packages") and Path(p, "inspect_ai").is_dir())
    (site / "zz-dependencies.pth").write_text(here + "\n")
    subprocess.run([venv / "bin" / "pip", "install", "-q", "--no-deps", str(wheel)], check=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    run = subprocess.run(
        [venv / "bin" / "python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(ROOT),
         str(Path(__file__)), "-k", "not from_the_installed_wheel"],
        cwd=elsewhere, capture_output=True, text=True, timeout=900, env={**os.environ, WHEEL_SITE: str(site)},
    )
    tail = run.stdout[-3000:] + run.stderr[-2000:]
    assert run.returncode == 0, tail
    assert "47 passed" in run.stdout, tail
