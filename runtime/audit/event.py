"""The audit event: one tool call, who made it, at which level, what was decided and why."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from caisson.policy.levels import Level

DecisionName = Literal["allow", "warn", "approved", "denied"]


class AuditEvent(BaseModel):
    """One tool call: who, what, which level, which decision and why, and how it went."""

    model_config = ConfigDict(extra="forbid")

    time: datetime = Field(default_factory=lambda: datetime.now(UTC))
    tenant: str = "default"
    session_id: str
    call_id: str
    tool: str
    tool_alias: str | None = None
    level: Level
    decision: DecisionName
    rule: str | None = None
    approver: str | None = None
    args_sha256: str = ""
    preview: str = ""
    duration_ms: float = 0.0
    # ok / error / denied / timeout / cancelled: what happened after the decision.
    outcome: str = "ok"
    bytes_in: int = 0
    bytes_out: int = 0
    message: str | None = None

    @field_validator("time")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
