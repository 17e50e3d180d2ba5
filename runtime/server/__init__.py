"""``caisson serve``: the hosted-platform interface. An HTTP API (FastAPI, served by uvicorn)
over one Runtime, for many tenants: API keys, sessions, tool calls and primitives, streamed
output, approvals, audit, quotas, Prometheus metrics, a console page and remote MCP."""
