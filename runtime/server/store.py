"""What the server keeps: tenants, API keys (as digests), the session registry, snapshots,
approvals and the request log, in SQLite by default or PostgreSQL by URL (SQLAlchemy Core,
psycopg). Every method runs its statement on a worker thread, so the event loop never waits
on the database."""

from __future__ import annotations

import json
import os
import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from caisson.audit import AuditEvent
from caisson.server.models import ApprovalInfo, KeyInfo, Quotas, RequestRecord, SessionInfo, SnapshotInfo, TenantInfo
from caisson.server.paging import key_cursor
from caisson.server.store_text import fitted, nul_escaped

T = TypeVar("T")
# A row of a list by name: its creation time and id.
Key = tuple[float, str]

# A session holds one of its tenant's seats while it opens ("starting") and while it is open.
HELD = ("starting", "open")
# A session's closed_reason when a client (or an operator) closed it.
CLOSED_ON_REQUEST = "closed on request"

meta = sa.MetaData()

tenants = sa.Table(
    "caisson_tenants", meta,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("name", sa.String(64), nullable=False, unique=True),
    sa.Column("quotas", sa.Text, nullable=False),
    sa.Column("created", sa.Float, nullable=False),
)
api_keys = sa.Table(
    "caisson_api_keys", meta,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("tenant_id", sa.String(64), nullable=True),
    sa.Column("scope", sa.String(16), nullable=False),
    sa.Column("digest", sa.String(64), nullable=False),
    sa.Column("label", sa.String(200), nullable=False, default=""),
    sa.Column("created", sa.Float, nullable=False),
    sa.Column("revoked", sa.Boolean, nullable=False, default=False),
)
sessions = sa.Table(
    "caisson_sessions", meta,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("tenant_id", sa.String(64), nullable=False, index=True),
    sa.Column("image", sa.String(300), nullable=True),
    sa.Column("profile", sa.String(64), nullable=False),
    sa.Column("memory", sa.String(32), nullable=False),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("created", sa.Float, nullable=False),
    sa.Column("closed", sa.Float, nullable=True),
    sa.Column("closed_reason", sa.Text, nullable=True),
    # The replica that holds the session's container and channel, and where it answers.
    sa.Column("server", sa.String(300), nullable=True),
    sa.Column("server_url", sa.String(300), nullable=True),
    # The session's configuration, so a replica that takes it over re-attaches it as it was.
    sa.Column("config", sa.Text, nullable=True),
)
# Each replica's last sign of life: a replica on another host that stops beating is gone.
replicas = sa.Table(
    "caisson_replicas", meta,
    sa.Column("name", sa.String(300), primary_key=True),
    sa.Column("seen", sa.Float, nullable=False),
)
snapshots = sa.Table(
    "caisson_snapshots", meta,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("tenant_id", sa.String(64), nullable=False, index=True),
    sa.Column("session_id", sa.String(64), nullable=False),
    sa.Column("ref", sa.String(300), nullable=False),
    sa.Column("created", sa.Float, nullable=False),
)
approvals = sa.Table(
    "caisson_approvals", meta,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("tenant_id", sa.String(64), nullable=False, index=True),
    sa.Column("session_id", sa.String(64), nullable=False),
    sa.Column("state", sa.String(16), nullable=False, index=True),
    sa.Column("body", sa.Text, nullable=False),
    sa.Column("message", sa.Text, nullable=True),
    sa.Column("approver", sa.String(64), nullable=True),
    sa.Column("created", sa.Float, nullable=False),
    sa.Column("answered", sa.Float, nullable=True),
)
# Tool-call events of every replica: the audit is the control plane's, not one process's.
audit_events = sa.Table(
    "caisson_audit", meta,
    sa.Column("id", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True, autoincrement=True),
    sa.Column("time", sa.Float, nullable=False),
    sa.Column("tenant", sa.String(64), nullable=False),
    sa.Column("session_id", sa.String(64), nullable=False),
    sa.Column("call_id", sa.String(64), nullable=False, index=True),
    sa.Column("tool", sa.String(64), nullable=False),
    sa.Column("tool_alias", sa.String(64), nullable=True),
    sa.Column("level", sa.String(16), nullable=False),
    sa.Column("decision", sa.String(16), nullable=False),
    sa.Column("rule", sa.Text, nullable=True),
    sa.Column("approver", sa.String(200), nullable=True),
    sa.Column("args_sha256", sa.String(64), nullable=False),
    sa.Column("preview", sa.Text, nullable=False),
    sa.Column("duration_ms", sa.Float, nullable=False),
    sa.Column("outcome", sa.String(64), nullable=False),
    sa.Column("bytes_in", sa.BigInteger, nullable=False),
    sa.Column("bytes_out", sa.BigInteger, nullable=False),
    sa.Column("message", sa.Text, nullable=True),
    sa.Index("caisson_audit_tenant_id", "tenant", "id"),
)
requests_log = sa.Table(
    "caisson_requests", meta,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("time", sa.Float, nullable=False),
    sa.Column("tenant_id", sa.String(64), nullable=True, index=True),
    sa.Column("key_id", sa.String(64), nullable=True),
    sa.Column("method", sa.String(16), nullable=False),
    sa.Column("path", sa.String(2048), nullable=False),
    sa.Column("status", sa.Integer, nullable=False),
    sa.Column("note", sa.String(200), nullable=False, default=""),
)


def database_url(db: str | None, state_dir: str | Path) -> str:
    """SQLAlchemy's URL for ``--db``: a PostgreSQL URL (driven by psycopg), an SQLite URL,
    or by default one SQLite file in the runtime's state directory."""
    if not db:
        return f"sqlite:///{Path(state_dir) / 'server.sqlite3'}"
    for prefix in ("postgresql://", "postgres://"):
        if db.startswith(prefix):
            return "postgresql+psycopg://" + db[len(prefix):]
    return db


class Store:
    def __init__(self, url: str) -> None:
        self.url = url
        self.engine: Engine = sa.create_engine(url, pool_pre_ping=True, **_engine_options(url))
        if url.startswith("sqlite"):
            sa.event.listen(self.engine, "connect", _sqlite_pragmas)
        sa.event.listen(self.engine, "before_cursor_execute", nul_escaped, retval=True)
        meta.create_all(self.engine)
        _add_missing_columns(self.engine)
        database = self.engine.url.database
        if url.startswith("sqlite") and database and database != ":memory:":
            # Key digests and the request log are nobody else's business on this host.
            os.chmod(database, 0o600)

    def close(self) -> None:
        self.engine.dispose()

    async def _run(self, fn: Callable[[Connection], T]) -> T:
        def work() -> T:
            with self.engine.begin() as conn:
                return fn(conn)

        return await anyio.to_thread.run_sync(work)

    async def ping(self) -> None:
        await self._run(lambda c: c.execute(sa.text("SELECT 1")))

    # ---- tenants and keys ---------------------------------------------------------------

    async def add_tenant(self, tenant_id: str, name: str, quotas: Quotas) -> TenantInfo:
        row = {"id": tenant_id, "name": name, "quotas": quotas.model_dump_json(), "created": time.time()}
        await self._run(lambda c: c.execute(tenants.insert().values(**row)))
        return _tenant(row)

    async def tenant(self, tenant_id: str) -> TenantInfo | None:
        row = await self._run(lambda c: c.execute(tenants.select().where(tenants.c.id == tenant_id)).mappings().first())
        return _tenant(row) if row else None

    async def tenant_named(self, name: str) -> TenantInfo | None:
        row = await self._run(lambda c: c.execute(tenants.select().where(tenants.c.name == name)).mappings().first())
        return _tenant(row) if row else None

    async def list_tenants(
        self, *, after: Key | None = None, newest_first: bool = False, limit: int = 100
    ) -> list[tuple[str, TenantInfo]]:
        rows = await self._run(lambda c: c.execute(_keyset(tenants.select(), tenants, after, newest_first, limit)).mappings().all())
        return _paged(rows, _tenant)

    async def set_quotas(self, tenant_id: str, quotas: Quotas) -> None:
        stmt = tenants.update().where(tenants.c.id == tenant_id).values(quotas=quotas.model_dump_json())
        await self._run(lambda c: c.execute(stmt))

    async def add_key(self, key: KeyInfo, digest: str) -> None:
        row = {**key.model_dump(), "digest": digest}
        await self._run(lambda c: c.execute(api_keys.insert().values(**row)))

    async def key(self, key_id: str) -> tuple[KeyInfo, str] | None:
        row = await self._run(lambda c: c.execute(api_keys.select().where(api_keys.c.id == key_id)).mappings().first())
        if row is None:
            return None
        data = dict(row)
        digest = data.pop("digest")
        return KeyInfo.model_validate(data), digest

    async def list_keys(
        self, tenant_id: str | None = None, *, after: Key | None = None, newest_first: bool = False, limit: int = 100
    ) -> list[tuple[str, KeyInfo]]:
        stmt = api_keys.select()
        if tenant_id is not None:
            stmt = stmt.where(api_keys.c.tenant_id == tenant_id)
        rows = await self._run(lambda c: c.execute(_keyset(stmt, api_keys, after, newest_first, limit)).mappings().all())
        return _paged(rows, lambda r: KeyInfo.model_validate({k: v for k, v in r.items() if k != "digest"}))

    async def revoke_key(self, key_id: str) -> bool:
        stmt = api_keys.update().where(api_keys.c.id == key_id).values(revoked=True)
        return bool(await self._run(lambda c: c.execute(stmt).rowcount))

    async def has_admin_key(self) -> bool:
        stmt = sa.select(sa.func.count()).select_from(api_keys).where(
            api_keys.c.scope == "admin", api_keys.c.revoked.is_(False)
        )
        return bool(await self._run(lambda c: c.execute(stmt).scalar()))

    # ---- sessions and snapshots ---------------------------------------------------------

    async def reserve_seats(
        self, tenant_id: str, n: int, limit: int, server: str, profile: str, memory: str
    ) -> tuple[list[str], int]:
        """Hold ``n`` of the tenant's ``limit`` session seats for sessions about to open, counted
        across every replica: the seat ids (none when they would exceed the limit) and how many
        the tenant held before. One transaction that first locks the tenant's row, so two
        replicas reserving at once are served one after the other."""
        def work(c: Connection) -> tuple[list[str], int]:
            c.execute(tenants.update().where(tenants.c.id == tenant_id).values(id=tenants.c.id))
            held = int(c.execute(
                sa.select(sa.func.count()).select_from(sessions).where(
                    sessions.c.tenant_id == tenant_id, sessions.c.state.in_(HELD)
                )
            ).scalar_one())
            if held + n > limit:
                return [], held
            seats = ["seat-" + secrets.token_hex(8) for _ in range(n)]
            c.execute(sessions.insert(), [
                {"id": seat, "tenant_id": tenant_id, "image": None, "profile": profile, "memory": memory,
                 "state": "starting", "created": time.time(), "server": server}
                for seat in seats
            ])
            return seats, held

        return await self._run(work)

    async def fill_seat(
        self, seat: str, info: SessionInfo, server: str, server_url: str | None, config: str | None = None
    ) -> None:
        """The session that opened in a reserved seat takes its place."""
        values = {**info.model_dump(), "server": server, "server_url": server_url, "config": config}

        def work(c: Connection) -> None:
            c.execute(sessions.delete().where(sessions.c.id == seat))
            c.execute(sessions.insert().values(**values))

        await self._run(work)

    async def release_seats(self, seats: list[str]) -> None:
        """Seats whose sessions did not open."""
        if seats:
            await self._run(lambda c: c.execute(sessions.delete().where(sessions.c.id.in_(seats), sessions.c.state == "starting")))

    async def close_session(self, session_id: str, reason: str = CLOSED_ON_REQUEST) -> None:
        """Closed, and its pending approvals expired with it: the calls waiting for them (in
        any server process: each re-reads its approval) end now, not at the approval timeout."""
        closing = sessions.update().where(sessions.c.id == session_id, sessions.c.state == "open").values(
            state="closed", closed=time.time(), closed_reason=reason[:1000]
        )

        def work(c: Connection) -> None:
            c.execute(closing)
            _expire_pending(c, [session_id], f"its session was closed ({reason[:200]}); denied")

        await self._run(work)

    async def beat(self, server: str) -> bool:
        """``server`` is alive now; whether the store still knew it (False: it is new, or the
        other replicas took it for gone)."""
        def work(c: Connection) -> bool:
            now = time.time()
            if c.execute(replicas.update().where(replicas.c.name == server).values(seen=now)).rowcount:
                return True
            c.execute(replicas.insert().values(name=server, seen=now))
            return False

        return await self._run(work)

    async def leave(self, server: str) -> None:
        """``server`` stopped cleanly (its sessions are closed already)."""
        await self._run(lambda c: c.execute(replicas.delete().where(replicas.c.name == server)))

    async def hand_over(self, server: str) -> None:
        """``server`` stopped and left its sessions running: it is gone for every replica at
        once, so the first to look takes them over."""
        await self._run(lambda c: c.execute(replicas.update().where(replicas.c.name == server).values(seen=0.0)))

    async def take_over_from_gone(
        self, alive: Callable[[str], bool], silent_since: float, server: str, server_url: str | None
    ) -> list[tuple[SessionInfo, str | None]]:
        """The open sessions of replicas that are gone become ``server``'s, to re-attach (with
        their configuration); their seats still starting are freed and their pending approvals
        expired (the calls waiting for them ended with their process). A replica is gone when
        ``alive`` says so, or when its last beat is older than ``silent_since``. One
        transaction: two replicas looking at once do not both take a session."""
        def work(c: Connection) -> list[tuple[SessionInfo, str | None]]:
            seen = {name: when for name, when in c.execute(sa.select(replicas.c.name, replicas.c.seen))}
            servers = c.execute(sa.select(sessions.c.server).where(sessions.c.state.in_(HELD)).distinct()).scalars()
            gone = [
                other for other in servers
                if other != server and (other is None or not alive(other) or seen.get(other, silent_since) < silent_since)
            ]
            if not gone:
                return []
            named = [g for g in gone if g is not None]
            c.execute(replicas.delete().where(replicas.c.name.in_(named)))
            theirs = sa.or_(sessions.c.server.in_(named), sessions.c.server.is_(None))
            c.execute(sessions.delete().where(sessions.c.state == "starting", theirs))
            _expire_pending(
                c, sa.select(sessions.c.id).where(sessions.c.state == "open", theirs),
                "the server holding the waiting call stopped before an answer; the call did not run",
            )
            rows = c.execute(sessions.select().where(sessions.c.state == "open", theirs)).mappings().all()
            c.execute(sessions.update().where(sessions.c.state == "open", theirs).values(server=server, server_url=server_url))
            return [
                (SessionInfo.model_validate({k: v for k, v in r.items() if k not in ("server", "server_url", "config")}),
                 r["config"])
                for r in rows
            ]

        return await self._run(work)

    async def set_home_url(self, server: str, server_url: str) -> None:
        """Where ``server``'s sessions are reached, once it listens."""
        stmt = sessions.update().where(sessions.c.server == server, sessions.c.state == "open").values(server_url=server_url)
        await self._run(lambda c: c.execute(stmt))

    async def session(self, session_id: str) -> SessionInfo | None:
        found = await self.session_and_home(session_id)
        return found[0] if found else None

    async def session_and_home(self, session_id: str) -> tuple[SessionInfo, str | None, str | None] | None:
        """A session, open or closed, with the replica that holds (or held) it and its address."""
        stmt = sessions.select().where(sessions.c.id == session_id, sessions.c.state != "starting")
        row = await self._run(lambda c: c.execute(stmt).mappings().first())
        if row is None:
            return None
        data = dict(row)
        server, url = data.pop("server"), data.pop("server_url")
        data.pop("config")
        return SessionInfo.model_validate(data), server, url

    async def list_sessions(
        self, tenant_id: str | None, state: str | None = "open", *, after: Key | None = None,
        newest_first: bool = False, limit: int = 100,
    ) -> list[tuple[str, SessionInfo]]:
        """A page of sessions with their cursors (every tenant's for None)."""
        stmt = sessions.select().where(sessions.c.state != "starting")
        if tenant_id is not None:
            stmt = stmt.where(sessions.c.tenant_id == tenant_id)
        if state is not None:
            stmt = stmt.where(sessions.c.state == state)
        rows = await self._run(lambda c: c.execute(_keyset(stmt, sessions, after, newest_first, limit)).mappings().all())
        return _paged(rows, lambda r: SessionInfo.model_validate({k: v for k, v in r.items() if k != "config"}))

    async def add_snapshot(self, info: SnapshotInfo, ref: str) -> None:
        await self._run(lambda c: c.execute(snapshots.insert().values(**info.model_dump(), ref=ref)))

    async def snapshot(self, snapshot_id: str) -> tuple[SnapshotInfo, str] | None:
        stmt = snapshots.select().where(snapshots.c.id == snapshot_id)
        row = await self._run(lambda c: c.execute(stmt).mappings().first())
        if row is None:
            return None
        data = dict(row)
        ref = data.pop("ref")
        return SnapshotInfo.model_validate(data), ref

    async def snapshot_refs(self, tenant_id: str) -> list[str]:
        """The engine references of every snapshot the tenant holds (for its disk quota)."""
        stmt = sa.select(snapshots.c.ref).where(snapshots.c.tenant_id == tenant_id)
        return list(await self._run(lambda c: c.execute(stmt).scalars().all()))

    async def list_snapshots(
        self, tenant_id: str, *, after: Key | None = None, newest_first: bool = False, limit: int = 100
    ) -> list[tuple[str, SnapshotInfo]]:
        stmt = snapshots.select().where(snapshots.c.tenant_id == tenant_id)
        rows = await self._run(lambda c: c.execute(_keyset(stmt, snapshots, after, newest_first, limit)).mappings().all())
        return _paged(rows, lambda r: SnapshotInfo.model_validate({k: v for k, v in r.items() if k != "ref"}))

    # ---- approvals ----------------------------------------------------------------------

    async def add_approval(self, info: ApprovalInfo) -> None:
        body = info.model_dump_json(exclude={"id", "tenant_id", "session_id", "state", "message", "approver", "created", "answered"})
        row = {k: getattr(info, k) for k in ("id", "tenant_id", "session_id", "state", "created")}
        await self._run(lambda c: c.execute(approvals.insert().values(**row, body=body)))

    async def answer_approval(self, approval_id: str, state: str, message: str | None, approver: str | None) -> bool:
        """Answer a pending approval; False if it was answered (or expired) already."""
        stmt = approvals.update().where(approvals.c.id == approval_id, approvals.c.state == "pending").values(
            state=state, message=message, approver=approver, answered=time.time()
        )
        return bool(await self._run(lambda c: c.execute(stmt).rowcount))

    async def approval(self, approval_id: str) -> ApprovalInfo | None:
        stmt = approvals.select().where(approvals.c.id == approval_id)
        row = await self._run(lambda c: c.execute(stmt).mappings().first())
        return _approval(row) if row else None

    async def list_approvals(
        self, tenant_id: str | None, state: str | None = "pending", *, after: Key | None = None,
        newest_first: bool = False, limit: int = 100,
    ) -> list[tuple[str, ApprovalInfo]]:
        """A page of the tenant's approvals with their cursors (every tenant's for None)."""
        stmt = approvals.select()
        if tenant_id is not None:
            stmt = stmt.where(approvals.c.tenant_id == tenant_id)
        if state is not None:
            stmt = stmt.where(approvals.c.state == state)
        rows = await self._run(lambda c: c.execute(_keyset(stmt, approvals, after, newest_first, limit)).mappings().all())
        return _paged(rows, _approval)

    # ---- audit ----------------------------------------------------------------------------

    async def write(self, events: Callable[[], list[AuditEvent]], requests: list[RequestRecord]) -> None:
        """Audit events (a batch of concurrent calls', made by ``events`` on the statement's
        worker thread) and request-log records, committed in one transaction."""
        def work(c: Connection) -> None:
            rows = [{**e.model_dump(), "time": e.time.timestamp()} for e in events()]
            if rows:
                c.execute(audit_events.insert(), fitted(audit_events, rows))
            if requests:
                c.execute(requests_log.insert(), fitted(requests_log, [r.model_dump() for r in requests]))

        await self._run(work)

    async def audit(
        self, tenant_id: str | None, *, session_id: str | None = None, tool: str | None = None,
        decision: str | None = None, call_id: str | None = None, since: float | None = None,
        after: int | None = None, newest_first: bool = False, limit: int = 100,
    ) -> list[tuple[str, AuditEvent]]:
        """Events with their ids (as cursors), in id order (newest first if asked), past the ``after`` id
        in that order; every given filter applies (``tool``: canonical or profile name)."""
        c = audit_events.c
        stmt = audit_events.select().limit(limit)
        for column, value in ((c.tenant, tenant_id), (c.session_id, session_id), (c.decision, decision), (c.call_id, call_id)):
            if value is not None:
                stmt = stmt.where(column == value)
        if tool is not None:
            stmt = stmt.where(sa.or_(c.tool == tool, c.tool_alias == tool))
        if since is not None:
            stmt = stmt.where(c.time >= since)
        if after is not None:
            stmt = stmt.where(c.id < after if newest_first else c.id > after)
        stmt = stmt.order_by(c.id.desc() if newest_first else c.id)
        rows = await self._run(lambda conn: conn.execute(stmt).mappings().all())
        return [(str(r["id"]), AuditEvent.model_validate({k: v for k, v in r.items() if k != "id"})) for r in rows]

    # ---- request log --------------------------------------------------------------------

    async def prune_requests(self, before: float) -> int:
        stmt = requests_log.delete().where(requests_log.c.time < before)
        return int(await self._run(lambda c: c.execute(stmt).rowcount))

    async def requests(
        self, tenant_id: str | None, *, after: int | None = None, newest_first: bool = False, limit: int = 100
    ) -> list[tuple[str, RequestRecord]]:
        """A page of the tenant's requests with their cursors (every caller's for None)."""
        c = requests_log.c
        stmt = requests_log.select().order_by(c.id.desc() if newest_first else c.id).limit(limit)
        if tenant_id is not None:
            stmt = stmt.where(c.tenant_id == tenant_id)
        if after is not None:
            stmt = stmt.where(c.id < after if newest_first else c.id > after)
        rows = await self._run(lambda conn: conn.execute(stmt).mappings().all())
        return [(str(r["id"]), RequestRecord.model_validate({k: v for k, v in r.items() if k != "id"})) for r in rows]


def _keyset(stmt: Any, table: sa.Table, after: Key | None, newest_first: bool, limit: int) -> Any:
    """``stmt`` ordered by creation time then id, past the row ``after`` names in that order:
    rows added meanwhile never shift a page."""
    key = sa.tuple_(table.c.created, table.c.id)
    if after is not None:
        stmt = stmt.where(key < after if newest_first else key > after)
    order = (table.c.created.desc(), table.c.id.desc()) if newest_first else (table.c.created, table.c.id)
    return stmt.order_by(*order).limit(limit)


def _paged(rows: Any, item: Callable[[Any], T]) -> list[tuple[str, T]]:
    return [(key_cursor(r["created"], r["id"]), item(r)) for r in rows]


def _add_missing_columns(engine: Engine) -> None:
    """A store made by an older release lacks the columns added since (all nullable): add them."""
    found = sa.inspect(engine)
    with engine.begin() as conn:
        for table in meta.sorted_tables:
            have = {c["name"] for c in found.get_columns(table.name)}
            for column in table.columns:
                if column.name not in have:
                    kind = column.type.compile(dialect=engine.dialect)
                    conn.execute(sa.text(f'ALTER TABLE {table.name} ADD COLUMN "{column.name}" {kind}'))


def _engine_options(url: str) -> dict[str, Any]:
    if url.startswith("sqlite"):
        # Statements run on worker threads; a busy file waits instead of failing at once.
        return {"connect_args": {"check_same_thread": False, "timeout": 30}}
    return {"pool_size": 10, "max_overflow": 20}


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.close()


def _tenant(row: Any) -> TenantInfo:
    data = dict(row)
    data["quotas"] = Quotas.model_validate_json(data["quotas"])
    return TenantInfo.model_validate(data)


def _expire_pending(c: Connection, session_ids: Any, message: str) -> None:
    """The pending approvals of these sessions (ids, or a select of them) answered "expired":
    each call waiting for one sees it at its next re-read of the store."""
    c.execute(approvals.update().where(approvals.c.state == "pending", approvals.c.session_id.in_(session_ids)).values(
        state="expired", message=message, answered=time.time()
    ))


def _approval(row: Any) -> ApprovalInfo:
    data = dict(row)
    return ApprovalInfo.model_validate({**json.loads(data.pop("body")), **data})
