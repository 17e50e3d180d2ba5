"""`caisson audit`: list and filter the audit events of this host's runtimes."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

from caisson.audit import AuditLog
from caisson.config import RuntimeConfig
from caisson.errors import CaissonError
from caisson.redact import escape_unsafe

_AGE = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def parse_since(text: str) -> datetime:
    """An ISO time, or an age such as 10m, 2h, 1d."""
    match = _AGE.match(text.strip())
    if match:
        return datetime.now(UTC) - timedelta(**{_UNITS[match.group(2)]: float(match.group(1))})
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise CaissonError(f"--since {text!r}: give an ISO time (2026-11-21T10:00) or an age (10m, 2h, 1d)") from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def show_audit(args: argparse.Namespace) -> Iterator[str]:
    state = Path(RuntimeConfig().state_dir)
    if not (state / "audit.jsonl").exists():
        raise CaissonError(
            f"no audit log at {state}: no session has made a tool call yet (CAISSON_STATE_DIR sets where;"
            " `caisson serve` keeps its audit in its store: GET /v1/audit)"
        )
    log = AuditLog.in_directory(state)
    try:
        events = log.query(
            session=args.session,
            tool=args.tool,
            decision=args.decision,
            since=parse_since(args.since) if args.since else None,
            limit=args.limit,
        )
        for event in events:
            # Arguments came from the agent: nothing in them may drive the reader's terminal.
            yield escape_unsafe(event.model_dump_json())
    finally:
        log.close()
