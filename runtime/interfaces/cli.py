"""The `caisson` command line. Errors are one readable line, never a bare traceback."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Coroutine
from typing import Any

import anyio

from caisson import logs
from caisson.errors import CaissonError


def _out(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _json(value: Any) -> None:
    _out(json.dumps(value, indent=2, default=str))


def cmd_demo(args: argparse.Namespace) -> Coroutine[Any, Any, None]:
    from caisson.interfaces.demo import run_demo

    return run_demo(_out)


def cmd_image(args: argparse.Namespace) -> Coroutine[Any, Any, None]:
    from caisson.config import RuntimeConfig
    from caisson.runtime import Runtime

    async def run() -> None:
        async with Runtime(RuntimeConfig(gc_on_start=False)) as rt:
            if args.image_cmd == "build":
                _out(await rt.backend.prepare_image(None, rebuild=args.force))
            elif args.image_cmd == "prune":
                _json(await rt.backend.prune_images())
            else:
                _json(await rt.backend.list_images())

    return run()


def cmd_gc(args: argparse.Namespace) -> Coroutine[Any, Any, None]:
    from caisson.config import RuntimeConfig
    from caisson.runtime import Runtime

    async def run() -> None:
        async with Runtime(RuntimeConfig(gc_on_start=False)) as rt:
            reaped = await rt.backend.reap(frozenset(), all_owners=args.all_owners)
        _json([r.model_dump() for r in reaped])

    return run()


def cmd_bench(args: argparse.Namespace) -> Coroutine[Any, Any, None]:
    from caisson.bench.runner import run_bench

    async def run() -> None:
        _json(await run_bench(iterations=args.iterations, only=args.only, overlay2_engine=args.overlay2_engine))

    return run()


def cmd_replay(args: argparse.Namespace) -> Coroutine[Any, Any, None]:
    from caisson.interfaces.replay import replay_file

    async def run() -> None:
        async for line in replay_file(args.file, profile=args.profile, approve_all=args.approve_all):
            _out(line)

    return run()


def cmd_mcp(args: argparse.Namespace) -> Coroutine[Any, Any, None]:
    from caisson.config import SessionConfig
    from caisson.interfaces.mcp_server import serve_http, serve_stdio

    # MCP clients stay open for hours: the session lives as long as the flags say.
    config = SessionConfig(image=args.image, ttl=args.ttl, idle_timeout=args.idle_timeout or None)
    common = {"profile": args.profile, "policy_file": args.policy, "approve_all": args.approve_all, "config": config}
    if args.http:
        host, _, port = args.http.rpartition(":")
        if not port.isdigit():
            raise CaissonError(f"--http {args.http}: give HOST:PORT, e.g. 127.0.0.1:8765")
        return serve_http(host=host or "127.0.0.1", port=int(port), **common)
    return serve_stdio(**common)


def _host_mapping(value: str) -> str:
    if "=" not in value or not value.split("=", 1)[1]:
        raise argparse.ArgumentTypeError(f"{value!r}: write NAME=ADDRESS, e.g. pypi.internal=10.0.0.5")
    return value


def cmd_serve(args: argparse.Namespace) -> Coroutine[Any, Any, None]:
    from caisson.server.serve import Hosted
    from caisson.server.settings import ServeSettings

    settings = ServeSettings(
        host=args.host, port=args.port, db=args.db, state_dir=args.state_dir, approval_timeout=args.approval_timeout,
        drain=args.drain, on_stop=args.on_stop, hand_over_for=args.hand_over_for,
        ssl_certfile=args.ssl_certfile, ssl_keyfile=args.ssl_keyfile, mcp=not args.no_mcp, new_admin_key=args.new_admin_key, public_url=args.public_url,
        egress_hosts=dict(entry.split("=", 1) for entry in args.egress_host or []),
    )

    def ready(hosted: Hosted) -> None:
        _out(f"caisson serve: listening on {hosted.url} (console: {hosted.url}/console, API: {hosted.url}/docs)")
        if hosted.admin_token:
            # The only time this key is shown: the store keeps its digest alone.
            _out(f"caisson serve: admin API key (shown once, keep it): {hosted.admin_token}")

    return Hosted(settings).run(on_ready=ready)


def cmd_tools(args: argparse.Namespace) -> Coroutine[Any, Any, None]:
    from caisson.profiles import get_profile
    from caisson.profiles.export import export_tools

    async def run() -> None:
        _json(export_tools(get_profile(args.profile), args.format))

    return run()


def cmd_prompt(args: argparse.Namespace) -> Coroutine[Any, Any, None]:
    from caisson.profiles import get_profile
    from caisson.profiles.export import prompt_text

    async def run() -> None:
        _out(prompt_text(get_profile(args.profile)))

    return run()


def cmd_doctor(args: argparse.Namespace) -> Coroutine[Any, Any, None]:
    from caisson.interfaces.doctor import report, run_doctor

    async def run() -> None:
        text, code = report(await run_doctor())
        _out(text)
        if code:
            raise SystemExit(code)

    return run()


def cmd_audit(args: argparse.Namespace) -> Coroutine[Any, Any, None]:
    from caisson.interfaces.audit_query import show_audit

    async def run() -> None:
        for line in show_audit(args):
            _out(line)

    return run()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="caisson", description="Sandboxed execution runtime for AI agents")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)

    sub.add_parser("demo", help="start a session, run a short scripted sequence, remove it").set_defaults(fn=cmd_demo)

    image = sub.add_parser("image", help="the sandbox image")
    image_sub = image.add_subparsers(dest="image_cmd", required=True)
    build = image_sub.add_parser("build", help="build the default image if its tag is missing (offline-capable)")
    build.add_argument("--force", action="store_true", help="rebuild even when the tag exists")
    image_sub.add_parser("ls", help="list caisson images")
    image_sub.add_parser("prune", help="remove caisson images other than the current one that no container uses")
    image.set_defaults(fn=cmd_image)

    gc = sub.add_parser("gc", help="remove containers whose owner is gone or whose TTL passed")
    gc.add_argument("--all-owners", action="store_true", help="remove every caisson container, live owners' too")
    gc.set_defaults(fn=cmd_gc)
    sub.add_parser(
        "doctor", help="check the engine, image, gVisor, Landlock and disk quotas, and say what to fix"
    ).set_defaults(fn=cmd_doctor)

    bench = sub.add_parser("bench", help="measure latencies (JSON, p50/p95) against docker exec")
    bench.add_argument("--iterations", type=int, default=200)
    bench.add_argument("--only", action="append", help="run only these groups (repeatable)")
    bench.add_argument(
        "--overlay2-engine", metavar="URL",
        help="disk group: measure cold start beside this overlay2 engine (e.g. unix:///run/o2/docker.sock); "
        "default: a throwaway one the bench starts and removes (needs root, dockerd and containerd)",
    )  # fmt: skip
    bench.set_defaults(fn=cmd_bench)

    replay = sub.add_parser("replay", help="run a JSON-lines file of tool calls in one fresh session")
    replay.add_argument("file", help='one {"tool": ..., "args": {...}} per line; - for standard input')
    replay.add_argument("--profile", default="caisson")
    replay.add_argument("--approve-all", action="store_true", help="approve dangerous calls without asking")
    replay.set_defaults(fn=cmd_replay)

    mcp = sub.add_parser("mcp", help="serve one session's tools to an MCP client (stdio, or Streamable HTTP)")
    mcp.add_argument("--profile", default="caisson")
    mcp.add_argument("--policy", help="policy file (.toml or .json); default: CAISSON_POLICY or the default policy")
    mcp.add_argument("--approve-all", action="store_true", help="approve dangerous calls without asking")
    mcp.add_argument("--http", metavar="HOST:PORT", help="serve Streamable HTTP at http://HOST:PORT/mcp instead of stdio")
    mcp.add_argument("--image", help="image to run; default: the built caisson image")
    mcp.add_argument("--ttl", type=float, default=8 * 3600, help="seconds the sandbox may live (default 8 h)")
    mcp.add_argument(
        "--idle-timeout", type=float, default=3600, help="seconds without a call before the sandbox stops; 0 = never"
    )
    mcp.set_defaults(fn=cmd_mcp)

    serve = sub.add_parser("serve", help="serve the hosted-platform HTTP API (tenants, sessions, console, MCP)")
    serve.add_argument("--host", default="127.0.0.1", help="interface to listen on (default loopback only)")
    serve.add_argument("--port", type=int, default=8700)
    serve.add_argument("--db", help="postgresql://user@host/db, or sqlite:///file; default: server.sqlite3 in the state dir")
    serve.add_argument("--state-dir", help="default: CAISSON_STATE_DIR or ~/.caisson")
    serve.add_argument("--approval-timeout", type=float, default=300.0, help="seconds a dangerous call waits")
    serve.add_argument("--drain", type=int, default=30,
                       help="seconds a stop (SIGTERM/SIGINT) lets calls in flight finish before cancelling them")
    serve.add_argument("--on-stop", choices=["close", "hand-over"], default="close",
                       help="at a stop, close the sessions (default) or leave them running for a restart or another replica")
    serve.add_argument("--hand-over-for", type=float, default=300.0,
                       help="seconds handed-over sessions wait to be taken over (at most their TTL)")
    serve.add_argument("--ssl-certfile", help="serve HTTPS with this certificate (PEM)")
    serve.add_argument("--ssl-keyfile", help="the certificate's private key (PEM)")
    serve.add_argument("--no-mcp", action="store_true", help="do not serve remote MCP at /mcp")
    serve.add_argument(
        "--egress-host", action="append", metavar="NAME=ADDRESS", type=_host_mapping,
        help="resolve NAME to ADDRESS for sessions' egress, reachable even when private (repeatable)",
    )
    serve.add_argument("--new-admin-key", action="store_true", help="make and print another admin key (a lost one)")
    serve.add_argument("--public-url", help="where clients reach this replica, told to clients that ask another one")
    # The server's event loop carries every request: uvloop's, where it is installed.
    serve.set_defaults(fn=cmd_serve, use_uvloop=True)

    tools = sub.add_parser("tools", help="export a profile's tool definitions")
    tools.add_argument("--profile", default="caisson")
    tools.add_argument("--format", default="json_schema", choices=["openai", "anthropic", "mcp", "json_schema"])
    tools.set_defaults(fn=cmd_tools)

    prompt = sub.add_parser("prompt", help="print the tools section of a system prompt for a profile")
    prompt.add_argument("--profile", default="caisson")
    prompt.set_defaults(fn=cmd_prompt)

    audit = sub.add_parser("audit", help="list audit events (JSON lines)")
    audit.add_argument("--session")
    audit.add_argument("--tool")
    audit.add_argument("--decision", help="allow, warn, approved or denied")
    audit.add_argument("--since", help="ISO time, or an age such as 10m, 2h, 1d")
    audit.add_argument("--limit", type=int, default=100)
    audit.set_defaults(fn=cmd_audit)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logs.configure(verbose=args.verbose)
    fn: Callable[[argparse.Namespace], Coroutine[Any, Any, None]] = args.fn
    try:
        anyio.run(lambda: fn(args), backend_options={"use_uvloop": getattr(args, "use_uvloop", False)})
    except CaissonError as exc:
        sys.stderr.write(f"caisson: error: {exc}\n")
        return 1
    except KeyboardInterrupt:
        sys.stderr.write("caisson: interrupted\n")
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
