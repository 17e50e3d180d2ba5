"""Inspect AI's own conformance suite for sandbox providers, run against the caisson provider
through its lifecycle (task_init, sample_init, ..., task_cleanup) on a real engine."""

from __future__ import annotations

from collections.abc import AsyncIterator
from importlib.metadata import entry_points

import pytest
from inspect_ai.util import SandboxEnvironment
from inspect_ai.util._sandbox import self_check
from inspect_ai.util._sandbox.registry import registry_find_sandboxenv
from inspect_ai.util._sandbox.self_check import *  # noqa: F403  (the suite's 44 checks)

from caisson.integrations.inspect import CaissonSandboxEnvironment

pytestmark = pytest.mark.anyio

TASK = "caisson-self-check"


@pytest.fixture(scope="module")
async def sample(anyio_backend: str) -> AsyncIterator[dict[str, SandboxEnvironment]]:
    await CaissonSandboxEnvironment.task_init(TASK, None)
    envs = await CaissonSandboxEnvironment.sample_init(TASK, None, {})
    try:
        yield envs
    finally:
        await CaissonSandboxEnvironment.sample_cleanup(TASK, None, envs, False)
        await CaissonSandboxEnvironment.task_cleanup(TASK, None, True)


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
