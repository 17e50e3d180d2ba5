"""How ``caisson serve`` runs: where it listens, where it keeps its state, its limits."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class ServeSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    host: str = Field("127.0.0.1", description="interface to listen on; loopback unless told otherwise")
    port: int = Field(8700, ge=0, le=65535, description="0: any free port")
    db: str | None = Field(None, description="postgresql://... or sqlite:///...; default: server.sqlite3 in the state dir")
    state_dir: str | None = Field(None, description="default: the runtime's (CAISSON_STATE_DIR or ~/.caisson)")
    public_url: str | None = Field(
        None, description="where clients reach this replica, told to clients of other replicas; default: the bound address"
    )
    image: str | None = Field(None, description="image of sessions that name none; default: the built caisson image")
    max_body: int = Field(16 * 1024 * 1024, gt=0, description="largest request body, bytes")
    max_upload: int = Field(1024 * 1024 * 1024, gt=0, description="largest tar copy-in, bytes (a file write: at most 256 MiB)")
    egress_hosts: dict[str, str] = Field(
        default_factory=dict, description="host name -> address for sessions' egress (RuntimeConfig.egress_hosts)"
    )
    drain: int = Field(
        30, ge=0, description="seconds a stop (SIGTERM, SIGINT) waits for calls in flight before cancelling them"
    )
    on_stop: Literal["close", "hand-over"] = Field(
        "close", description="at a stop, close the sessions, or leave them running for a restart or another replica"
    )
    hand_over_for: float = Field(300.0, gt=0, description="seconds a handed-over session waits to be taken over")
    approval_timeout: float = Field(300.0, gt=0, description="seconds a dangerous call waits for an answer")
    request_log_days: float = Field(30.0, gt=0, description="days the request log keeps a request")
    new_admin_key: bool = Field(False, description="make (and print) another admin key at start, for a lost one")
    mcp: bool = Field(True, description="serve Streamable HTTP MCP at /mcp (and /mcp/<profile>)")
    log_level: str = "warning"
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
