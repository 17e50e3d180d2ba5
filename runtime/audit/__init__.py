"""The audit log: one structured event per tool call (who, what, which level, which decision
and why), written off the call's path to JSON lines and SQLite, with arguments kept only as a
digest and a redacted preview."""

from caisson.audit.event import AuditEvent, DecisionName
from caisson.audit.log import AuditLog, summarise
from caisson.audit.sink import AuditSink

__all__ = ["AuditEvent", "AuditLog", "AuditSink", "DecisionName", "summarise"]
