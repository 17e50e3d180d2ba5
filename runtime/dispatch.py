"""The boundary every tool call crosses: profile lookup → schema validation → permission
policy → audit → canonical handler. A denied call never reaches the daemon (except for a
read-only `stat`, as the agent, to resolve the real path of a path argument).

An allowed call's handler gets a client confined to what was decided: file ops as the agent
user beneath the workspace roots the policy checked (unless the call was approved as
dangerous), commands as the agent under the Landlock level of the decision. The policy's
decision and the daemon's open therefore cannot disagree."""

from __future__ import annotations

import fnmatch
import inspect
import posixpath
import random
import re
import shlex
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ValidationError

from caisson.audit import AuditEvent, AuditSink
from caisson.client.models import Confinement
from caisson.client.primitives import SandboxClient
from caisson.errors import CaissonError, OpError
from caisson.logs import get_logger
from caisson.policy import (
    ApprovalHandler,
    CallRequest,
    Decision,
    GrantStore,
    Level,
    Policy,
    PolicyEngine,
    ResolvedPath,
    is_secret,
    is_within,
)
from caisson.profiles import get_profile
from caisson.profiles.base import Profile, ProfileTool
from caisson.tools.base import NotPlain, ToolError, ToolResult
from caisson.tools.context import InteractionHandler, Probe, ToolContext

log = get_logger(__name__)

# The most a call's arguments may hold in all, and per field of the canonical tools: enough for
# any real file, command or pattern; beyond them a call is refused before anything is parsed.
MAX_ARGS_CHARS = 64 * 1024 * 1024
FIELD_LIMITS = {
    "command": 256 * 1024,
    "pattern": 64 * 1024,
    "glob": 4096,
    "query": 8192,
    "url": 8192,
    "expression": 64 * 1024,
    "old_string": 16 * 1024 * 1024,
    "new_string": 16 * 1024 * 1024,
    "edits": 1000,
    "todos": 1000,
    "questions": 100,
    "env": 1000,
}
# The paths of a command's words (globs and braces expanded) looked at for links and other
# names, one stat each; a command naming more is dangerous, whatever its classification.
MAX_WORDS_RESOLVED = 256


BRACES = re.compile(r"\{([^{}]*,[^{}]*|[a-zA-Z]\.\.[a-zA-Z]|-?[0-9]+\.\.-?[0-9]+)\}")


def _braces(word: str, limit: int = 64) -> list[str]:
    """The words bash's brace expansion makes of ``word`` (lists and ranges), at most ``limit``."""
    found = BRACES.search(word)
    if found is None:
        return [word]
    inner = found.group(1)
    if "," in inner:
        alternatives = inner.split(",")
    else:
        first, last = inner.split("..")
        if first.lstrip("-").isdigit():
            step = 1 if int(last) >= int(first) else -1
            alternatives = [str(i) for i in range(int(first), int(last) + step, step)[:limit]]
        else:
            step = 1 if last >= first else -1
            alternatives = [chr(c) for c in range(ord(first), ord(last) + step, step)]
    words = []
    for alt in alternatives:
        words.extend(_braces(word[: found.start()] + alt + word[found.end():], limit))
        if len(words) >= limit:
            break
    return words[:limit]


def oversized(args: dict[str, Any], limits: dict[str, int] | None = None) -> str | None:
    """Why ``args`` are too large (as the agent should read it), or None. Walks without
    recursion, so deep nesting cannot overflow the stack."""
    if limits:
        for key, limit in limits.items():
            value = args.get(key)
            if isinstance(value, str | list | dict) and len(value) > limit:
                unit = "characters" if isinstance(value, str) else "items"
                return f"{key} has {len(value):,} {unit}; the limit is {limit:,}. Split the work into smaller calls."
    total = 0
    stack: list[Any] = [args]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            total += len(item)
        elif isinstance(item, dict):
            total += len(item)
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            total += len(item)
            stack.extend(item)
        if total > MAX_ARGS_CHARS:
            return f"the arguments hold more than {MAX_ARGS_CHARS:,} characters. Split the work into smaller calls."
    return None


def validation_message(tool: str, exc: ValidationError) -> str:
    """One line per bad field, naming it, e.g. `file_path: Field required`."""
    parts = []
    for err in exc.errors()[:5]:
        where = ".".join(str(p) for p in err["loc"]) or "(arguments)"
        parts.append(f"{where}: {err['msg']}")
    return f"invalid arguments for {tool}: " + "; ".join(parts)


def audit_event(
    request: CallRequest,
    decision: Decision,
    *,
    outcome: str | None = None,
    duration_ms: float = 0.0,
    bytes_in: int = 0,
    bytes_out: int = 0,
    message: str | None = None,
) -> AuditEvent:
    """The audit event of a decided call; the digest and preview are left to the sink's ``record(args=)``."""
    return AuditEvent(
        tenant=request.tenant,
        session_id=request.session_id,
        call_id=request.call_id,
        tool=request.tool,
        tool_alias=request.tool_alias,
        level=decision.level,
        decision=decision.outcome,
        rule=decision.rule,
        approver=decision.approver,
        duration_ms=duration_ms,
        outcome=outcome or ("ok" if decision.allowed else "denied"),
        bytes_in=bytes_in,
        bytes_out=bytes_out,
        message=message if message is not None else (decision.message or None),
    )


def _home_of(user: str) -> str:
    return f"/home/{user}"


@dataclass
class Dispatcher:
    """One session's tool calls: its profile, its policy engine and grants, its tools' state."""

    client: SandboxClient
    profile: Profile
    engine: PolicyEngine
    audit: AuditSink
    interaction_handler: InteractionHandler | None = None
    state: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def create(
        cls,
        client: SandboxClient,
        *,
        policy: Policy,
        audit: AuditSink,
        approval_handler: ApprovalHandler | None = None,
        interaction_handler: InteractionHandler | None = None,
    ) -> Dispatcher:
        if "workspace_roots" not in policy.model_fields_set:
            # One place for the workspace: the session's workdir, /tmp and the agent's home (what
            # `~` means to bash, git and Amp's tools) unless the policy names roots.
            home = _home_of(client.config.agent_user)
            policy = policy.model_copy(update={"workspace_roots": [client.config.workdir, "/tmp", home]})
        return cls(
            client=client,
            profile=get_profile(client.config.profile),
            engine=PolicyEngine(policy, GrantStore(), approval_handler),
            audit=audit,
            interaction_handler=interaction_handler,
        )

    @property
    def grants(self) -> GrantStore:
        return self.engine.grants

    @property
    def _home(self) -> str:
        return _home_of(self.client.config.agent_user)

    @property
    def _agent(self) -> SandboxClient:
        return self.client.confined(Confinement(user=self.client.config.agent_user))

    def confinement(self, level: Level, paths: Sequence[ResolvedPath] = ()) -> Confinement:
        """What the kernel lets a call decided at ``level`` on ``paths`` do."""
        roots = tuple(self.engine.policy.workspace_roots)
        # Paths the policy found inside the roots must still be inside when the daemon opens them.
        inside = bool(paths) and all(is_within(p.resolved, roots) for p in paths)
        # The home's dot entries and ~/bin hold what programs run at start: the kernel lets
        # commands write beneath the home's other entries, not in the home itself.
        home = self._home if self._home in roots and self._home != self.client.config.workdir else None
        decided = tuple((p.requested, (p.resolved,) if p.entry is None else (p.resolved, p.entry)) for p in paths)
        return Confinement(
            user=self.client.config.agent_user,
            roots=roots if inside else None,
            decided=decided,
            level=level.value,
            write_roots=tuple(r for r in roots if r != home),
            entry_roots=(home,) if home else (),
            network=self.client.config.network,
            egress_port=self.client.config.egress_port,
        )

    def context(
        self,
        call_id: str = "",
        confinement: Confinement | None = None,
        probes: dict[str, Probe] | None = None,
        plain: bool = False,
    ) -> ToolContext:
        """What a handler of this session is given for call ``call_id``; by default (a handler
        called directly by the embedding program) it works with the agent's own rights."""
        return ToolContext(
            client=self.client.confined(confinement or self.confinement(Level.DANGEROUS)),
            state=self.state,
            grants=self.engine.grants,
            call_id=call_id,
            interaction_handler=self.interaction_handler,
            permissions=self.engine,
            catalog=self.profile.catalog,
            probes=probes or {},
            plain=plain,
        )

    async def _resolve(self, path: str, prefetch: int = 0) -> tuple[ResolvedPath, Probe | None]:
        """The real path inside the container, symbolic links included, for the policy; and
        what the one stat that found it learned (with ``prefetch`` bytes of a regular file)."""
        lexical = self.client.resolve(path)
        try:
            # ``nearest``: a new file's real path is its deepest existing ancestor's, so a new
            # file under a symlinked directory is caught.
            st = await self._agent.stat(lexical, nearest=True, read=prefetch)
        except OpError:
            if lexical == "/":
                return ResolvedPath(requested=lexical, resolved=lexical), None
            # Not the agent's to see: resolve the parent and keep the name.
            parent, name = posixpath.split(lexical)
            above, _ = await self._resolve(parent)
            return ResolvedPath(requested=lexical, resolved=posixpath.join(above.resolved, name)), None
        if st.exists and st.realpath:
            links = st.nlink if st.type == "file" else 1
            read = st.read_eof is not None
            probe = Probe(st, st.head if read else None, st.read_eof is True)
            return ResolvedPath(requested=lexical, resolved=st.realpath, links=links, entry=st.entry), probe
        real = posixpath.normpath(st.nearest) if st.nearest is not None else lexical
        return ResolvedPath(requested=lexical, resolved=real, entry=st.entry), Probe(st)

    async def command_client(self, tool: str, command: str, *, cwd: str | None, env: dict[str, str]) -> SandboxClient:
        """The client to run a command given outside a tool call (a hosted tenant's exec or
        spawn) with: decided as bash's command line is, its environment and directory
        included, asking the session's approver where the policy says so; audited like a call.
        A refused command raises OpError ``permission_denied``."""
        where = self.client.resolve(cwd) if cwd else self.client.cwd
        reached = await self._reached(command, where)
        request = CallRequest(
            tenant=self.client.config.tenant, session_id=self.client.id, call_id=f"c-{random.getrandbits(48):012x}",
            tool=tool, tool_alias=tool, args={"command": command, "cwd": cwd, "env": env}, command=command, env=env,
            cwd=where, paths=reached or [],
            # Too many paths to look at all: no classification may lower the call below dangerous.
            level=Level.DANGEROUS if reached is None else None, level_is_floor=reached is None,
            kernel_confines=bool(self.client.info and (self.client.info.landlock or self.client.info.levels)),
        )
        decision = await self.engine.decide(request)
        event = audit_event(request, decision, outcome="ok" if decision.allowed else "denied", message=decision.message or None)
        self.audit.record(event, args=request.args, focus=decision.decisive)
        if not decision.allowed:
            raise OpError("permission_denied", decision.message)
        return self.client.confined(self.confinement(decision.level))

    async def _reached(self, command: str, cwd: str) -> list[ResolvedPath] | None:
        """The files a command line's words name that the classifier, which judges names, cannot
        see: a secret reached through a symbolic link, or a file with other names (one may be a
        secret's). The policy then decides on them as on a read tool's paths. None: the words
        name more than MAX_WORDS_RESOLVED paths."""
        try:
            words = shlex.split(command)
        except ValueError:
            return []  # unparseable: the classifier makes it dangerous
        policy = self.engine.policy
        home = f"/home/{self.client.config.agent_user}"
        named = dict.fromkeys(
            posixpath.join(cwd, home + word[1:] if word == "~" or word.startswith("~/") else word)
            for given in words
            for word in _braces(given.partition("=")[2] or given, MAX_WORDS_RESOLVED + 1)
            if word and not word.startswith("-")
        )
        if len(named) > MAX_WORDS_RESOLVED:
            return None
        paths: list[str] = []
        for path in named:
            paths.extend(await self._glob(path))
            if len(paths) > MAX_WORDS_RESOLVED:
                return None
        found = []
        for each in paths:
            try:
                st = await self._agent.stat(each)
            except OpError:
                continue
            if not st.exists or st.realpath is None:
                continue
            links = st.nlink if st.type == "file" else 1
            # The system's own multi-name files (root's, outside the roots) are no one's secret.
            ours = st.uid != 0 or is_within(st.realpath, policy.workspace_roots)
            if (links > 1 and ours) or is_secret(st.realpath, policy.secret_patterns, policy.secret_exceptions):
                found.append(ResolvedPath(requested=each, resolved=st.realpath, links=links))
        return found

    async def _glob(self, path: str) -> list[str]:
        """The paths a word with glob characters matches now (as bash does: a leading dot only
        by a pattern's leading dot), one directory listing per step; a plain path as it is."""
        matched = ["/"]
        for part in path.split("/")[1:]:
            if len(matched) > MAX_WORDS_RESOLVED:
                break  # more than are looked at: the caller's limit
            if not part or not any(c in part for c in "*?["):
                matched = [posixpath.join(m, part) for m in matched]
                continue
            found: list[str] = []
            for base in matched:
                try:
                    entries = await self._agent.list_dir(base)
                except OpError:
                    continue
                found.extend(
                    posixpath.join(base, e.name) for e in entries
                    if fnmatch.fnmatchcase(e.name, part) and (part.startswith(".") or not e.name.startswith("."))
                )
            matched = found
        return matched

    async def call(self, name: str, raw_args: dict[str, Any]) -> ToolResult:
        """One tool call, always answered and always audited once, whatever goes wrong."""
        started = time.perf_counter()
        request = CallRequest(
            tenant=self.client.config.tenant, session_id=self.client.id, call_id=f"c-{random.getrandbits(48):012x}", tool=name,
            tool_alias=name, args=raw_args,
        )
        try:
            return await self._call(request, raw_args, started)
        except Exception as exc:  # a bug or an input nobody foresaw: still one failed, audited call
            log.exception("tool call failed unexpectedly", tool=name, call_id=request.call_id)
            result = ToolResult.failure("internal_error", f"{name} failed inside caisson ({type(exc).__name__}); nothing was retried")
            return self._finish(request, self.profile.lookup(name), result, started)

    async def _call(self, request: CallRequest, raw_args: dict[str, Any], started: float) -> ToolResult:
        name = request.tool
        problem = oversized(raw_args)
        if problem:
            return self._finish(request, None, ToolResult.failure("arguments_too_large", problem), started)
        ptool = self.profile.lookup(name)
        if ptool is None:
            available = ", ".join(sorted(self.profile.tools))
            result = ToolResult.failure("unknown_tool", f"unknown tool {name!r}; this session offers: {available}")
            return self._finish(request, None, result, started)
        try:
            args = ptool.input_model.model_validate(raw_args)
            canonical_args = ptool.to_canonical(args, self.context(request.call_id))
            if inspect.isawaitable(canonical_args):
                canonical_args = await canonical_args
        except ValidationError as exc:
            result = ToolResult.failure("invalid_arguments", validation_message(ptool.name, exc))
            return self._finish(request, ptool, result, started)
        except ToolError as exc:
            return self._finish(request, ptool, ToolResult.failure(exc.code, exc.message, exc.data), started)

        given = vars(canonical_args)
        fields = {key: given[key] for key in FIELD_LIMITS if key in given}
        problem = oversized(fields, FIELD_LIMITS)
        if problem:
            return self._finish(request, ptool, ToolResult.failure("arguments_too_large", problem), started)
        canonical = ptool.canonical
        url = urlsplit(canonical.url(canonical_args) or "")
        cwd = canonical.cwd(canonical_args, self.client.config.workdir)
        request = request.model_copy(
            update={
                "domain": (url.hostname or "").lower() or None,
                "query": bool(url.query),
                "tool": canonical.name,
                "level": ptool.effective_level,
                "level_is_floor": ptool.level_is_floor,
                "command": canonical.command(canonical_args),
                "env": canonical.env(canonical_args) or {},
                "cwd": self.client.resolve(cwd) if cwd else self.client.cwd,
                "access": canonical.access,
                "reads": canonical.reads,
                "kernel_confines": bool(self.client.info and (self.client.info.landlock or self.client.info.levels)),
            }
        )
        paths = [p for p in canonical.paths(canonical_args) if p]
        if canonical.plain and paths:
            # Most paths are plain: decide on them as given and let the handler's one round
            # trip check that they are; only if not (or if the call needs asking) resolve them.
            as_given = [self.client.resolve(p) for p in paths]
            plain = request.model_copy(update={"paths": [ResolvedPath(requested=p, resolved=p) for p in as_given]})
            decision = await self.engine.decide(plain, ask=False)
            if decision.allowed:
                ctx = self.context(request.call_id, self.confinement(decision.level, plain.paths), plain=True)
                try:
                    result = await self._run(ptool, canonical_args, ctx)
                except NotPlain:
                    pass
                else:
                    return self._finish(plain, ptool, ptool.present(result, args), started, decision)
        found = [await self._resolve(p, canonical.prefetch) for p in paths]
        # A working directory the call names is placed where it really is (links followed).
        real_cwd = next((r.resolved for r, _ in found if r.requested == request.cwd), request.cwd)
        request = request.model_copy(update={"paths": [resolved for resolved, _ in found], "cwd": real_cwd})
        decision = await self.engine.decide(request)
        if decision.allowed:
            confinement = self.confinement(decision.level, request.paths)
            # What the probes read is handed on only now, the call allowed.
            probes = {resolved.requested: probe for resolved, probe in found if probe is not None}
            result = await self._run(ptool, canonical_args, self.context(request.call_id, confinement, probes))
        else:
            result = ToolResult.failure("permission_denied", decision.message)
        return self._finish(request, ptool, ptool.present(result, args), started, decision)

    async def _run(self, ptool: ProfileTool, args: BaseModel, ctx: ToolContext) -> ToolResult:
        try:
            return await ptool.canonical.handler(ctx, args)
        except ToolError as exc:
            return ToolResult.failure(exc.code, exc.message, exc.data)
        except OpError as exc:
            return ToolResult.failure(exc.code, exc.message)
        except CaissonError as exc:
            return ToolResult.failure(exc.code, str(exc))

    def _finish(
        self,
        request: CallRequest,
        ptool: ProfileTool | None,
        result: ToolResult,
        started: float,
        decision: Decision | None = None,
    ) -> ToolResult:
        level = decision.level if decision else (ptool.effective_level if ptool else Level.SAFE)
        result.tool = ptool.name if ptool else request.tool
        result.call_id = request.call_id
        result.level = level
        result.decision = decision.outcome if decision else None
        duration_ms = (time.perf_counter() - started) * 1000
        if decision is None:
            # Refused before the policy: unknown tool or invalid arguments. Nothing ran.
            decision = Decision(allowed=False, outcome="denied", level=level, message=result.text)
        event = audit_event(
            request,
            decision,
            outcome=("ok" if result.ok else (result.error.code if result.error else "error"))
            if decision.allowed else "denied",
            duration_ms=duration_ms,
            bytes_out=len(result.text.encode()),
            message=None if result.ok else result.text[:500],
        )
        self.audit.record(event, args=request.args, focus=decision.decisive)
        return result
