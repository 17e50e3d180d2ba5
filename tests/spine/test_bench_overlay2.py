"""`caisson bench --only disk` measures cold start on overlay2 beside the hard-limit engine, on a
throwaway engine it starts for the run and leaves nothing of afterwards (no process, no data,
no mount), with the host's engine untouched."""

from __future__ import annotations

from pathlib import Path

import pytest

from caisson.bench.disk import bench_cold_start
from caisson.bench.engine import engines_root
from caisson.runtime import Runtime

pytestmark = [pytest.mark.anyio, pytest.mark.exclusive]


def _processes_naming(text: str) -> list[str]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            line = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue  # ended meanwhile
        if text in line:
            found.append(line)
    return found


async def test_cold_start_beside_a_throwaway_overlay2_engine(rt: Runtime, tmp_path: Path) -> None:
    state = tmp_path / "state"
    run_dirs = set(Path("/run").glob("caisson-o2-*"))
    links = sorted(p.name for p in Path("/sys/class/net").iterdir())
    report = await bench_cold_start(iterations=100, state_dir=str(state))
    print(report)
    beside = report["overlay2_beside"]
    assert isinstance(beside, dict), f"overlay2 not measured: {beside}"
    assert report["storage_driver"] != "overlay2"
    assert beside["engine"] == "throwaway"
    assert beside["to_first_command"]["n"] == report["to_first_command"]["n"] == 5
    assert 0 < beside["to_first_command"]["p50_ms"] <= beside["to_first_command"]["p95_ms"]
    assert beside["ratio_p50"] == round(report["to_first_command"]["p50_ms"] / beside["to_first_command"]["p50_ms"], 2)
    assert beside["target_p50"] == 1.3

    # Nothing of the throwaway engine is left: no directory, no process, no mount.
    root = engines_root(state)
    assert not list(root.iterdir()), f"left behind: {list(root.iterdir())}"
    assert _processes_naming(str(root)) == []
    assert set(Path("/run").glob("caisson-o2-*")) <= run_dirs, "its short-path directory under /run is left"
    assert str(root) not in Path("/proc/self/mountinfo").read_text()
    # The host's network is as it was: a dockerd without a bridge deletes docker0 at start,
    # and the host engine's bridge network (network=True sessions) with it.
    assert sorted(p.name for p in Path("/sys/class/net").iterdir()) == links
    # The host's engine still answers, on its own storage.
    await rt.backend.ping()
    assert (await rt.backend.facts()).storage_driver == report["storage_driver"]
