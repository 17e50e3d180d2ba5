"""Conformance fixtures: a real session per profile (Docker required; a missing engine fails
the tests, it never skips them)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import pytest

from caisson import Runtime, Session
from caisson.policy import Policy
from caisson.tools.base import ToolResult

# Conformance is about shapes and texts, not approvals: dangerous calls are auto-approved
# (deny rules, confinement, secret files and destructive commands still apply).
APPROVE_ALL = Policy(auto_approve_all=True)


@pytest.fixture(scope="module", params=["runc", "gvisor"])
def engine(request: pytest.FixtureRequest) -> str:
    """Every profile's conformance runs on both runtimes: gVisor is offered for untrusted work,
    so its tools must behave as on runc."""
    return str(request.param)


@asynccontextmanager
async def profile_session(rt: Runtime, profile: str, engine: str, **overrides: Any) -> AsyncIterator[Session]:
    overrides.setdefault("policy", APPROVE_ALL)
    overrides["gvisor"] = engine == "gvisor"
    async with rt.session(profile=profile, **overrides) as session:
        yield session


async def sh(session: Session, script: str) -> str:
    """Set up files for a test with a plain shell command (not through the profile)."""
    res = await session.exec(script, timeout=60)
    assert res.exit_code == 0, res.stderr
    return res.stdout


def as_json(result: ToolResult) -> Any:
    """The result's text parsed as JSON; it must equal the structured data."""
    value = json.loads(result.text)
    assert value == result.data
    return value


def answers(mapping: Mapping[str, Any]) -> Any:
    """An interaction handler that answers each question from ``mapping`` (by question text)."""

    async def handler(questions: list[Any]) -> Mapping[str, Any]:
        return {q.text: mapping[q.text] for q in questions if q.text in mapping}

    return handler
