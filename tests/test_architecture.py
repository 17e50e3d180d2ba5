"""The shape of ``runtime/``: data flows one way, so no import cycle and nothing imports upward.

Imports are read from the source (``ast``), including those under ``TYPE_CHECKING`` and inside
functions: a cycle hidden from the interpreter is still one for a reader.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Floors from the top (interfaces) down to the leaves; a module may import its own floor or lower.
LAYERS: list[tuple[str, ...]] = [
    ("caisson.interfaces",),
    ("caisson.bench", "caisson.integrations", "caisson.server", "caisson.remote"),
    ("caisson.mcp_tools",),
    ("caisson", "caisson.runtime"),
    ("caisson.session",),
    ("caisson.session_protocol",),
    ("caisson.dispatch",),
    ("caisson.egress",),
    ("caisson.profiles",),
    ("caisson.tools",),
    ("caisson.audit",),
    ("caisson.policy",),
    ("caisson.docker", "caisson.workspace_diff"),
    ("caisson.backend",),
    ("caisson.client",),
    ("caisson.transport",),
    ("caisson.config", "caisson.errors", "caisson.logs", "caisson.redact"),
]


def module_name(path: Path) -> str:
    """The import name of a file of runtime/ (installed as ``caisson``)."""
    parts = ("caisson", *path.relative_to(ROOT / "runtime").with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    """The ``caisson`` modules ``path`` imports, resolved to module names (not attributes)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            # ``from caisson.tools import files`` names a module, not an attribute.
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return {m for m in found if m in MODULES}


# runtime/_sandbox is the daemon's package (sandbox/) under the import package: not a floor.
MODULES = {module_name(p): p for p in (ROOT / "runtime").rglob("*.py") if "_sandbox" not in p.parts}
GRAPH = {name: imports_of(path) - {name} for name, path in MODULES.items()}


def floor(module: str) -> int:
    best, depth = -1, -1
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            exact = prefix in ("caisson",)
            matches = module == prefix if exact else module == prefix or module.startswith(prefix + ".")
            if matches and len(prefix) > depth:
                best, depth = index, len(prefix)
    assert best >= 0, f"{module} is on no floor: add it to LAYERS"
    return best


def cycles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(GRAPH):
        if v not in index:
            visit(v)
    return found


def test_the_graph_is_read() -> None:
    # Guards the reader itself: these edges exist, so a broken parser cannot pass the tests below.
    assert "caisson.transport.channel" in GRAPH["caisson.client.primitives"]
    assert "caisson.policy" in GRAPH["caisson.dispatch"]
    assert len(MODULES) > 80


def test_no_import_cycle() -> None:
    found = cycles()
    print(f"modules: {len(MODULES)}, import edges: {sum(map(len, GRAPH.values()))}, cycles: {len(found)}")
    assert found == []


def test_nothing_imports_upward() -> None:
    upward = [
        f"{src} -> {dst}"
        for src, targets in sorted(GRAPH.items())
        for dst in sorted(targets)
        if floor(dst) < floor(src) and src != "caisson"
    ]
    print(f"upward imports: {len(upward)}")
    assert upward == []


@pytest.mark.parametrize("package", ["runtime", "sandbox"])
def test_modules_stay_readable(package: str) -> None:
    """No module over about 500 lines unless it is one cohesive thing (listed here with why)."""
    cohesive = {
        # One tool each, with the seeds' exact output formats.
        "runtime/tools/process/shell.py",
        "runtime/tools/search/grep.py",
        "runtime/tools/git.py",
        # The agentloop profile: one specification's tool set.
        "runtime/profiles/agentloop.py",
        # The daemon's search: one op with ripgrep parity.
        "sandbox/search.py",
        # The daemon's client: one method per declared op (tests/test_opspec.py holds them to it).
        "runtime/client/primitives.py",
    }
    long = {
        str(p.relative_to(ROOT)): n
        for p in (ROOT / package).rglob("*.py")
        if "_sandbox" not in p.relative_to(ROOT / package).parts
        if (n := len(p.read_text().splitlines())) > 550 and str(p.relative_to(ROOT)) not in cohesive
    }
    assert long == {}


# The engine's client belongs to its backend; the bench's baselines measure Docker itself.
DOCKER_ALLOWED = ("caisson.docker", "caisson.bench.baseline", "caisson.bench.pool")


def test_only_the_docker_backend_imports_docker_py() -> None:
    found = []
    for name, path in sorted(MODULES.items()):
        if any(name == a or name.startswith(a + ".") for a in DOCKER_ALLOWED):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            )
            found += [f"{name} imports {m}" for m in mods if m == "docker" or m.startswith("docker.")]
    print(f"modules outside the Docker backend importing docker-py: {len(found)}")
    assert found == []


def test_nothing_above_the_backend_reaches_into_the_docker_package() -> None:
    """Sessions, the server, integrations and interfaces go through ``Backend``; only the
    runtime's default (and the bench's Docker baselines) name the Docker backend."""
    allowed = {"caisson.runtime": {"caisson.docker.backend"}, "caisson.bench.baseline": {"caisson.docker.backend", "caisson.docker.images"}}
    reach = [
        f"{src} -> {dst}"
        for src, targets in sorted(GRAPH.items())
        for dst in sorted(targets)
        if dst.startswith("caisson.docker") and not src.startswith("caisson.docker")
        and dst not in allowed.get(src, set())
    ]
    print(f"imports of caisson.docker from above it: {len(reach)}")
    assert reach == []
