"""The audit log: one structured event per tool call, written off the call's path.

``record()`` only enqueues; a background thread renders each event through structlog as one
JSON line and inserts it into an embedded SQLite store, which ``query()`` reads. Arguments
are never stored: an event keeps their SHA-256 (canonical JSON) and a short redacted
preview. Both can be computed by the writer thread (``record(event, args=...)``) so that
hashing a large file write costs the caller nothing.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping, MutableMapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

import structlog

from caisson.audit.event import AuditEvent
from caisson.redact import digest_and_size, redact_preview, redact_text

_stdlib_log = logging.getLogger("caisson.audit")
# The writer waits this long after an event for others: calls made in a burst are written in
# one go (one transaction) rather than each one's writing taking the GIL from the next call.
BATCH_LINGER = 0.02


_COLUMNS = tuple(AuditEvent.model_fields)
_SCHEMA = """
CREATE TABLE IF NOT EXISTS audit_events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    time TEXT NOT NULL, tenant TEXT NOT NULL, session_id TEXT NOT NULL, call_id TEXT NOT NULL,
    tool TEXT NOT NULL, tool_alias TEXT, level TEXT NOT NULL, decision TEXT NOT NULL, rule TEXT,
    approver TEXT, args_sha256 TEXT NOT NULL, preview TEXT NOT NULL, duration_ms REAL NOT NULL,
    outcome TEXT NOT NULL, bytes_in INTEGER NOT NULL, bytes_out INTEGER NOT NULL, message TEXT
);
CREATE INDEX IF NOT EXISTS audit_session_time ON audit_events (session_id, time);
CREATE INDEX IF NOT EXISTS audit_time ON audit_events (time);
CREATE INDEX IF NOT EXISTS audit_tool ON audit_events (tool);
"""


def _time_key(value: datetime) -> str:
    """Fixed-width UTC ISO text, so that SQLite compares times as strings correctly."""
    value = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    return value.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


_INSERT = f"INSERT INTO audit_events ({','.join(_COLUMNS)}) VALUES ({','.join('?' * len(_COLUMNS))})"


def _valid_utf8(value: Any) -> Any:
    """Lone surrogates (from JSON escapes) cannot be stored as UTF-8; show them escaped."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    return value


def _add_severity(_logger: Any, method_name: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    event_dict["severity"] = method_name
    return event_dict


_STOP = object()
UNAVAILABLE = "<unavailable>"

def summarise(event: AuditEvent, args: Mapping[str, Any] | None, focus: str | None) -> AuditEvent:
    """The event as stored: the arguments' digest, size and redacted preview (keeping
    ``focus``, the deciding part of a long command, in view), its message redacted."""
    update: dict[str, Any] = {}
    try:
        if args is not None:
            update["args_sha256"], size = digest_and_size(args)
            if not event.bytes_in:  # sized here, off the call path, unless the caller knew it
                update["bytes_in"] = size
            update["preview"] = redact_preview(args, focus=focus)
        if event.message:
            update["message"] = redact_text(event.message)
    except Exception:  # odd arguments must not cost the event itself
        _stdlib_log.exception("summarising audit arguments failed")
        update = {"args_sha256": "", "preview": UNAVAILABLE, "message": None}
    return event.model_copy(update=update) if update else event


class AuditLog:
    """Audit events to a JSON-lines file and/or an SQLite database, written by one thread."""

    def __init__(self, jsonl_path: str | os.PathLike[str] | None, sqlite_path: str | os.PathLike[str] | None) -> None:
        if jsonl_path is None and sqlite_path is None:
            raise ValueError("AuditLog needs a JSON-lines path, an SQLite path or both")
        self.jsonl_path = Path(jsonl_path) if jsonl_path is not None else None
        self.sqlite_path = Path(sqlite_path) if sqlite_path is not None else None
        self.write_errors = 0
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=65536)
        self._closed = False
        self._file: TextIO | None = None
        if self.jsonl_path is not None:
            self.jsonl_path.parent.mkdir(parents=True, exist_ok=True)
            # Previews are redacted, but an audit trail is still nobody else's business.
            fd = os.open(self.jsonl_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            self._file = os.fdopen(fd, "a", encoding="utf-8", errors="backslashreplace")
        if self.sqlite_path is not None:
            self.sqlite_path.parent.mkdir(parents=True, exist_ok=True)
            with self._connect() as conn:
                conn.executescript(_SCHEMA)
            os.chmod(self.sqlite_path, 0o600)
        self._logger = structlog.wrap_logger(
            structlog.WriteLogger(self._file) if self._file is not None else structlog.ReturnLogger(),
            processors=[_add_severity, structlog.processors.JSONRenderer(sort_keys=False, ensure_ascii=False)],
            wrapper_class=structlog.BoundLogger,
            cache_logger_on_first_use=True,
        )
        self._thread = threading.Thread(target=self._run, name="caisson-audit", daemon=True)
        self._thread.start()

    @classmethod
    def in_directory(cls, directory: str | os.PathLike[str]) -> AuditLog:
        """The default layout: audit.jsonl and audit.sqlite3 in ``directory``."""
        d = Path(directory)
        return cls(d / "audit.jsonl", d / "audit.sqlite3")

    # ------------------------------------------------------------------ writing

    def record(self, event: AuditEvent, *, args: Mapping[str, Any] | None = None, focus: str | None = None) -> None:
        """Enqueue an event. With ``args`` the writer thread fills in the digest and preview
        (keeping ``focus``, the deciding part of a long command, in view); the caller must not
        mutate ``args`` afterwards."""
        if self._closed:
            raise RuntimeError("audit log is closed")
        self._queue.put((event, args, focus))

    def flush(self) -> None:
        """Block until every event recorded so far is written."""
        self._queue.join()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._queue.put(_STOP)
        self._thread.join()
        if self._file is not None:
            self._file.close()

    def __enter__(self) -> AuditLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _connect(self) -> sqlite3.Connection:
        assert self.sqlite_path is not None
        conn = sqlite3.connect(self.sqlite_path, timeout=30)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        return conn

    def _run(self) -> None:
        conn = self._connect() if self.sqlite_path is not None else None
        try:
            while True:
                batch = [self._queue.get()]
                time.sleep(BATCH_LINGER)
                while len(batch) < 512:
                    try:
                        batch.append(self._queue.get_nowait())
                    except queue.Empty:
                        break
                stop = any(item is _STOP for item in batch)
                events = []
                for item in batch:
                    if item is not _STOP:
                        events.append(self._finish(*item))
                        time.sleep(0)  # the interpreter to the calls' thread between events
                try:
                    self._write(events, conn)
                except Exception:  # keep auditing after a transient failure (disk full …)
                    self.write_errors += 1
                    _stdlib_log.exception("writing %d audit events failed", len(events))
                for _ in batch:
                    self._queue.task_done()
                if stop:
                    return
        finally:
            if conn is not None:
                conn.close()

    def _finish(self, event: AuditEvent, args: Mapping[str, Any] | None, focus: str | None) -> AuditEvent:
        finished = summarise(event, args, focus)
        if finished.preview == UNAVAILABLE:
            self.write_errors += 1
        return finished

    def _write(self, events: list[AuditEvent], conn: sqlite3.Connection | None) -> None:
        rows = []
        for event in events:
            data = {k: _valid_utf8(v) for k, v in event.model_dump(mode="json").items()}
            data["time"] = _time_key(event.time)
            if self._file is not None:
                severity = "warning" if event.decision in ("warn", "denied") or event.outcome != "ok" else "info"
                getattr(self._logger, severity)("tool_call", **data)
            rows.append(tuple(data[c] for c in _COLUMNS))
        if conn is not None and rows:
            with conn:
                conn.executemany(_INSERT, rows)

    # ------------------------------------------------------------------ reading

    def query(
        self,
        session: str | None = None,
        tool: str | None = None,
        decision: str | None = None,
        since: datetime | None = None,
        *,
        tenant: str | None = None,
        limit: int = 100,
    ) -> list[AuditEvent]:
        """The most recent ``limit`` events matching every given filter, oldest first.
        ``tool`` matches the canonical name or the profile's name."""
        if self.sqlite_path is None:
            return self._query_jsonl(session, tool, decision, since, tenant, limit)
        clauses, params = _filters(session, tool, decision, since, tenant)
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        sql = f"SELECT {','.join(_COLUMNS)} FROM audit_events {where} ORDER BY id DESC LIMIT ?"
        conn = sqlite3.connect(self.sqlite_path, timeout=30)
        try:
            rows = conn.execute(sql, (*params, limit)).fetchall()
        finally:
            conn.close()
        return [AuditEvent.model_validate(dict(zip(_COLUMNS, row, strict=True))) for row in reversed(rows)]

    def _query_jsonl(
        self, session: str | None, tool: str | None, decision: str | None, since: datetime | None, tenant: str | None, limit: int
    ) -> list[AuditEvent]:
        matched: list[AuditEvent] = []
        for event in self._read_jsonl():
            if session is not None and event.session_id != session:
                continue
            if tool is not None and tool not in (event.tool, event.tool_alias):
                continue
            if decision is not None and event.decision != decision:
                continue
            if tenant is not None and event.tenant != tenant:
                continue
            if since is not None and _time_key(event.time) < _time_key(since):
                continue
            matched.append(event)
        return matched[-limit:] if limit > 0 else []

    def _read_jsonl(self) -> Iterator[AuditEvent]:
        assert self.jsonl_path is not None
        if not self.jsonl_path.exists():
            return
        with self.jsonl_path.open(encoding="utf-8") as fh:
            for line in fh:
                if not line.strip():
                    continue
                data = json.loads(line)
                yield AuditEvent.model_validate({k: v for k, v in data.items() if k in _COLUMNS})


def _filters(
    session: str | None, tool: str | None, decision: str | None, since: datetime | None, tenant: str | None
) -> tuple[list[str], list[Any]]:
    clauses: list[str] = []
    params: list[Any] = []
    if session is not None:
        clauses.append("session_id = ?")
        params.append(session)
    if tool is not None:
        clauses.append("(tool = ? OR tool_alias = ?)")
        params += [tool, tool]
    if decision is not None:
        clauses.append("decision = ?")
        params.append(decision)
    if tenant is not None:
        clauses.append("tenant = ?")
        params.append(tenant)
    if since is not None:
        clauses.append("time >= ?")
        params.append(_time_key(since))
    return clauses, params
