"""File-tool benchmark: grep and glob over a generated tree of 20,000 files next to ripgrep run
directly in the same container, edit_file on a 1 MB file, and read_file / write_file on 10 KB
beside their primitives (wired into ``caisson bench``)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from caisson.bench.stats import measure, summarize

if TYPE_CHECKING:
    from caisson.session import Session

BENCH_ROOT = "/workspace/bench-tree"

# Python run inside the container: a deterministic source tree with nested .gitignore files,
# hidden and ignored directories, CRLF and UTF-8 text, binary files and symbolic links.
_TREE = r"""
import os, random, sys
root, count, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(seed)
words = ("alpha beta gamma delta epsilon zeta theta lambda sigma omega config handler "
         "request response client server Error error TODO fixme résumé naïve 日本語 ünïcode").split()
exts = (".py", ".js", ".ts", ".md", ".txt", ".rs", ".go", ".json", ".log", ".gen.py")
tops = ("src", "lib", "docs", "tests", "build", "node_modules", ".hidden", "pkg")
def write(rel, data):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
write(".gitignore", b"build/\nnode_modules/\n*.log\n!keep.log\n/rootonly.txt\n**/tmp_*\n!.toolrc\n")
write("src/.gitignore", b"generated/\n*.gen.py\n!important.gen.py\n")
write("src/sub3/.gitignore", b"!*.log\n")
write("rootonly.txt", b"alpha root only\n")
write("lib/rootonly.txt", b"alpha not anchored here\n")
write(".toolrc", b"alpha hidden but re-included\n")
write(".otherrc", b"alpha hidden\n")
write("keep.log", b"alpha kept log\n")
write("src/important.gen.py", b"alpha important\n")
write("src/generated/x.py", b"alpha generated\n")
write("binary_early.dat", b"alpha\x00\x01\x02" * 10)
write("binary_late.txt", b"alpha line\n" * 9000 + b"tail\x00\n")
write("crlf.txt", b"alpha one\r\nbeta two\r\nalpha three\r\n")
write("nonl.txt", b"alpha without final newline")
write("empty.txt", b"")
write("long.txt", b"alpha " + b"x" * 5000 + b" omega\n")
write("multi.txt", b"start alpha\nbeta end\nalpha\nbeta\n")
write("bom.txt", b"\xef\xbb\xbfalpha with bom\n")
os.makedirs(os.path.join(root, "links"), exist_ok=True)
for name, target in (("links/file_link.py", "../src/important.gen.py"), ("links/dir_link", "../src")):
    try:
        os.symlink(target, os.path.join(root, name))
    except FileExistsError:
        pass
for i in range(count):
    top = tops[i % len(tops)]
    depth = rng.randint(0, 3)
    parts = [top] + ["sub%d" % rng.randint(0, 5) for _ in range(depth)]
    name = ("tmp_" if rng.random() < 0.02 else "") + ("." if rng.random() < 0.03 else "") + "f%d" % i
    rel = "/".join(parts + [name + rng.choice(exts)])
    lines = []
    for _ in range(rng.randint(1, 40)):
        lines.append(" ".join(rng.choice(words) for _ in range(rng.randint(1, 12))))
    newline = "\r\n" if rng.random() < 0.05 else "\n"
    write(rel, (newline.join(lines) + newline).encode("utf-8"))
"""


async def make_tree(session: Session, root: str = BENCH_ROOT, files: int = 20_000, seed: int = 7) -> None:
    """Generate the benchmark tree at ``root`` inside the container (replacing any old one)."""
    await session.exec(["rm", "-rf", root], timeout=120)
    result = await session.exec(["python3", "-c", _TREE, root, str(files), str(seed)], timeout=600)
    if result.exit_code != 0:
        raise RuntimeError(f"generating the benchmark tree failed: {result.stderr[-2000:]}")


async def _paired(
    ours: Any, theirs: Any, iterations: int, warmup: int = 2
) -> tuple[dict[str, float], dict[str, float]]:
    """Both measured in alternating order in the same loop, so load on the machine hits both alike."""
    for _ in range(warmup):
        await ours()
        await theirs()
    a: list[float] = []
    b: list[float] = []
    for i in range(iterations):
        for fn, samples in ((ours, a), (theirs, b)) if i % 2 == 0 else ((theirs, b), (ours, a)):
            start = time.perf_counter()
            await fn()
            samples.append((time.perf_counter() - start) * 1000)
    return summarize(a), summarize(b)


async def bench_file_tools(session: Session, iterations: int) -> dict[str, Any]:
    """p50/p95 of grep and glob on 20,000 files against ripgrep run directly (``session.exec``),
    and of edit_file on a 1 MB file."""
    n = max(5, iterations // 10)
    await make_tree(session)
    pattern = "handler.*Error"
    results: dict[str, Any] = {}

    async def grep_files() -> None:
        r = await session.call("grep", {"pattern": pattern, "path": BENCH_ROOT})
        assert r.ok, r.text

    async def grep_content() -> None:
        r = await session.call("grep", {"pattern": pattern, "path": BENCH_ROOT, "output_mode": "content"})
        assert r.ok, r.text

    async def rg_files() -> None:
        r = await session.exec(
            ["rg", "-l", "--no-require-git", pattern, BENCH_ROOT], timeout=120, stdout_max=32 * 1024 * 1024
        )
        assert r.exit_code in (0, 1), r.stderr

    async def rg_content() -> None:
        r = await session.exec(
            ["rg", "-n", "--no-require-git", pattern, BENCH_ROOT], timeout=120, stdout_max=32 * 1024 * 1024
        )
        assert r.exit_code in (0, 1), r.stderr

    async def glob_tool() -> None:
        r = await session.call("glob", {"pattern": "**/*.py", "path": BENCH_ROOT})
        assert r.ok, r.text

    async def rg_list() -> None:
        r = await session.exec(
            ["rg", "--files", "--no-require-git", "-g", "*.py", BENCH_ROOT], timeout=120, stdout_max=32 * 1024 * 1024
        )
        assert r.exit_code in (0, 1), r.stderr

    results["grep_files_with_matches"], results["rg_direct_files_with_matches"] = await _paired(grep_files, rg_files, n)
    results["grep_content"], results["rg_direct_content"] = await _paired(grep_content, rg_content, n)
    results["glob"], results["rg_direct_files_glob"] = await _paired(glob_tool, rg_list, n)
    for name, ours, theirs in (
        ("grep_vs_rg_ratio_p50", "grep_files_with_matches", "rg_direct_files_with_matches"),
        ("grep_content_vs_rg_ratio_p50", "grep_content", "rg_direct_content"),
        ("glob_vs_rg_files_ratio_p50", "glob", "rg_direct_files_glob"),
    ):
        results[name] = round(results[ours]["p50_ms"] / max(results[theirs]["p50_ms"], 1e-6), 2)

    big = "/workspace/bench-1mb.py"
    line = "value = compute(alpha, beta, gamma)  # a line of ordinary code\n"
    body = line * (1024 * 1024 // len(line))
    await session.write_file(big, body + "MARKER = 0\n")
    state = {"i": 0}

    async def edit_big() -> None:
        old, new = f"MARKER = {state['i']}", f"MARKER = {state['i'] + 1}"
        state["i"] += 1
        r = await session.call("edit_file", {"path": big, "old_string": old, "new_string": new})
        assert r.ok, r.text

    results["edit_file_1mb"] = await measure(edit_big, n, warmup=2)

    # The whole tool path (validation, policy with its path stat, confinement, audit) on 10 KB,
    # beside the bare primitive it wraps.
    small, text = "/workspace/bench-10kb.txt", "0123456789abcdef\n" * 640
    await session.write_file(small, text)
    results["read_file_tool_10kb"] = await measure(lambda: session.call("read_file", {"path": small}), iterations)
    results["read_primitive_10kb"] = await measure(lambda: session.read_file(small), iterations)
    results["write_file_tool_10kb"] = await measure(
        lambda: session.call("write_file", {"path": small, "content": text}), iterations
    )
    results["write_primitive_10kb"] = await measure(lambda: session.write_file(small, text), iterations)
    await session.exec(["rm", "-rf", BENCH_ROOT, big, small], timeout=120)
    return results
