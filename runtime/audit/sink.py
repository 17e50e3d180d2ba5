"""Where a runtime's sessions record their calls' events: the local audit log by default, or
an embedding control plane's store (``Runtime.audit_to``), which is then the audit of record."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from caisson.audit.event import AuditEvent


class AuditSink(Protocol):
    def record(self, event: AuditEvent, *, args: Mapping[str, Any] | None = None, focus: str | None = None) -> None:
        """Take one event, at once and without blocking: ``args`` (not to be mutated afterwards)
        become its digest and redacted preview off the call's path, keeping ``focus`` in view."""
        ...
