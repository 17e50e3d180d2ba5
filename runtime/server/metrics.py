"""Prometheus metrics of one server, in a registry of its own (so two servers in one process,
as in tests, do not share counters)."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from caisson.tools.base import ToolResult

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class _SessionsCollector(Collector):
    def __init__(self, counts: Callable[[], dict[str, int]]) -> None:
        self._counts = counts

    def collect(self):  # type: ignore[no-untyped-def]
        family = GaugeMetricFamily("caisson_sessions", "Sessions open, by tenant", labels=["tenant"])
        for tenant, n in sorted(self._counts().items()):
            family.add_metric([tenant], n)
        yield family


class Metrics:
    def __init__(self, session_counts: Callable[[], dict[str, int]]) -> None:
        self.registry = CollectorRegistry()
        self.registry.register(_SessionsCollector(session_counts))
        self.calls = Counter(
            "caisson_calls", "Tool calls, by tool, decision and outcome",
            ["tool", "decision", "outcome"], registry=self.registry,
        )
        self.latency = Histogram(
            "caisson_call_seconds", "Tool call latency as the server sees it", ["tool"], registry=self.registry,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
        )
        self.quota_refusals = Counter(
            "caisson_quota_refusals", "Requests refused by a tenant quota", ["tenant", "quota"], registry=self.registry
        )
        self.requests = Counter(
            "caisson_http_requests", "API requests, by method and status", ["method", "status"], registry=self.registry
        )

    def call(self, result: ToolResult, seconds: float) -> None:
        outcome = "ok" if result.ok else (result.error.code if result.error else "error")
        # A name the profile does not know is the caller's text: one label for all of them.
        tool = "unknown" if outcome == "unknown_tool" or not result.tool else result.tool
        self.calls.labels(tool, result.decision or "none", outcome).inc()
        self.latency.labels(tool).observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)
