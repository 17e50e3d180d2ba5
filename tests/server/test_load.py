"""The bench group 'hosted' at a small size: a real ``caisson serve`` process, several tenants
and concurrent clients, every call answered correctly."""

from __future__ import annotations

import pytest

from caisson.bench.hosted import bench_hosted

pytestmark = pytest.mark.anyio


async def test_hosted_bench_group_runs_clean(sandbox_image: str) -> None:
    report = await bench_hosted(tenants=2, sessions=4, clients=8, calls=80)
    print(report)
    assert report["errors"] == 0 and report["call"]["n"] == 80
    assert report["call"]["p50_ms"] > 0 and report["calls_per_second"] > 0
    cpu = report["cpu_per_call_ms"]
    assert cpu["server"] > 0 and cpu["library_in_process"] > 0 and len(cpu["library_in_process_samples"]) == 3
    assert cpu["library_in_process"] == sorted(cpu["library_in_process_samples"])[1]
    # The same calls again from lean HTTP clients, then through the library with as many
    # sessions and callers: every one answered correctly, each load timed.
    for beside in (report["lean_clients"], report["library_in_process"]):
        assert beside["errors"] == 0 and beside["call"]["n"] == 80, beside["error_samples"]
        assert beside["calls_per_second"] > 0 and beside["clients_cpu_per_call_ms"] > 0
    assert report["lean_clients"]["server_cpu_per_call_ms"] > 0
