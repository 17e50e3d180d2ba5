"""The decision procedure every tool call goes through before the container sees it.

Order of precedence (the first that applies decides):

1. a known-destructive command (or, for ``exec``, shell metacharacters): denied, always;
2. an effective level above ``max_level``: denied;
3. a ``deny`` rule;
4. a path outside the workspace roots, or a secret file read: denied unless an allow rule
   whose ``path`` matches that path, or a path grant, lifts it;
5. an ``ask`` rule: approval needed (grants, then the approval handler);
6. ``allow`` rules: allowed (for bash, only the commands they cover);
7. the level: up to ``auto_approve`` allowed (safe silently, cautious with a warning,
   dangerous only under auto_approve_all); above it, approval needed.
"""

from __future__ import annotations

import functools
import re
from fnmatch import fnmatchcase

import anyio

from caisson.logs import get_logger
from caisson.redact import redact_preview, redact_text

from .bash import BashClassification, check_exec_metacharacters, classify_bash
from .calls import (
    ACCESS_GRANT_LEVEL,
    ApprovalAnswer,
    ApprovalHandler,
    ApprovalRequest,
    CallRequest,
    Decision,
    Outcome,
    PermissionAnswer,
    domain_allowed,
)
from .environment import environment_reasons
from .grants import Grant, GrantStore, TargetType
from .levels import GrantLevel, Level
from .model import Policy, Rule
from .paths import glob_match, is_secret, is_within, matches_any, normalize

_log = get_logger("caisson.policy")

# Commands longer than this are classified in a worker thread.
INLINE_CLASSIFY_CHARS = 4096

class _Call:
    """Per-call facts computed once."""

    def __init__(self, req: CallRequest, ask: bool) -> None:
        self.req = req
        self.ask = ask
        self.paths = [(normalize(p.requested), normalize(p.resolved)) for p in req.paths]
        self.bash: BashClassification | None = None
        # Names in the call's env that made it dangerous.
        self.environment: list[str] = []
        self.reasons: list[str] = []
        self.need = ACCESS_GRANT_LEVEL[req.access]


class PolicyEngine:
    """Decides tool calls for one session against ``policy``, remembering grants in ``grants``."""

    def __init__(
        self,
        policy: Policy,
        grants: GrantStore,
        approval_handler: ApprovalHandler | None = None,
    ) -> None:
        self.policy = policy
        self.grants = grants
        self.approval_handler = approval_handler

    # ------------------------------------------------------------------ decide

    async def decide(self, req: CallRequest, *, ask: bool = True) -> Decision:
        """The decision on ``req``; with ``ask`` false, a call that would need a person's
        approval is denied instead of asked about (the caller decides again, asking)."""
        call = _Call(req, ask)
        decision = await self._decide(call)
        if call.environment:
            # The environment decided: the audit preview keeps it in view, however long the command.
            shown = " ".join(f"{name}={req.env[name]}" for name in call.environment)
            decision = decision.model_copy(update={"decisive": f"env {shown}"})
        elif call.bash is not None and call.bash.segments:
            # The part of the command that set its level, for a preview of a long command.
            top = max(seg.level for seg in call.bash.segments)
            decisive = next(seg.text for seg in call.bash.segments if seg.level == top)
            decision = decision.model_copy(update={"decisive": decisive})
        return decision

    async def _decide(self, call: _Call) -> Decision:
        p = self.policy
        req = call.req
        # The tool's own declared level; a call that names none (an unknown tool) fails closed.
        level = p.tool_levels.get(req.tool) or req.level or Level.DANGEROUS

        # No program can be given a NUL byte (argv and environment are C strings): such a call
        # cannot run, so it is refused at once rather than put to an approver.
        if "\x00" in (req.command or "") or any("\x00" in k + v for k, v in req.env.items()):
            return _deny(level, "nul_byte", "The command or its env contains a NUL byte, which no program can be given: nothing ran.")

        if req.command is not None:
            if req.tool == "exec":
                problem = check_exec_metacharacters(req.command)
                if problem:
                    return _deny(level, "exec:metacharacters", problem)
            classify = functools.partial(
                classify_bash,
                req.command,
                cwd=req.cwd,
                workspace_roots=p.workspace_roots,
                secret_patterns=p.secret_patterns,
                secret_exceptions=p.secret_exceptions,
                protected_paths=p.protected_paths,
            )
            # A long line takes long to analyse: off the event loop, so other sessions' calls go on.
            long = len(req.command) > INLINE_CLASSIFY_CHARS
            call.bash = await anyio.to_thread.run_sync(classify) if long else classify()
            if req.level_is_floor and call.bash.level < level:
                call.reasons.append(f"{req.tool_alias or req.tool} is declared {level}: its command cannot lower that")
            else:
                level = call.bash.level
            call.reasons.extend(call.bash.reasons)
            if not req.kernel_confines and level < Level.DANGEROUS:
                level = Level.DANGEROUS
                call.reasons.append("the kernel cannot confine commands here (no Landlock): every command is dangerous")
            if call.bash.destructive:
                return _deny(
                    level,
                    f"destructive:{call.bash.destructive}",
                    f"Refusing to run a known-destructive command ({call.bash.destructive}).",
                    call.reasons,
                    destructive=call.bash.destructive,
                )

        environment = environment_reasons(req.env)
        if environment:
            level = Level.DANGEROUS
            call.reasons.extend(reason for _, reason in environment)
            call.environment = [name for name, _ in environment]

        if (req.access == "read" or req.reads) and level < Level.DANGEROUS:
            linked = [path for path in req.paths if path.links > 1]
            if linked:
                level = Level.DANGEROUS
                call.reasons.append(
                    f"{linked[0].resolved} has {linked[0].links} names (hard links): another may be a secret file's"
                )

        if req.domain is not None and not domain_allowed(req.domain, p.allowed_domains) and level < Level.DANGEROUS:
            level = Level.DANGEROUS
            sent = "its URL and query string" if req.query else "its URL"
            call.reasons.append(f"sends {sent} to {req.domain}, which is not among the session's allowed domains")

        if req.access in ("write", "delete"):
            for _, resolved in call.paths:
                protected = matches_any(p.protected_paths, resolved)
                if protected:
                    level = Level.DANGEROUS
                    call.reasons.append(f"writes {resolved}, a protected path ({protected})")

        if level > p.max_level:
            return _deny(level, "max_level", f"{level} calls are not allowed in this session (max_level is {p.max_level}).", call.reasons)

        matched: list[tuple[str, Rule, set[int] | None]] = []
        for index, rule in enumerate(p.rules):
            hit, covered = self._rule_matches(rule, call)
            if hit:
                matched.append((p.rule_name(index), rule, covered))

        for name, rule, _ in matched:
            if rule.effect == "deny":
                return _deny(level, name, rule.message or f"Denied by policy rule {name}.", call.reasons)

        allows = [(name, rule, covered) for name, rule, covered in matched if rule.effect == "allow"]
        denial = self._confinement(call, allows, level)
        if denial is not None:
            return denial

        ask = next(((name, rule) for name, rule, _ in matched if rule.effect == "ask"), None)
        if ask is not None:
            return await self._approval(call, level, ask[0])

        auto = p.effective_auto_approve
        if allows:
            name = allows[0][0]
            residual = self._residual_level(call, allows)
            if residual <= auto:
                return Decision(
                    allowed=True,
                    outcome="allow" if level is Level.SAFE else "warn",
                    level=level,
                    rule=name,
                    message=f"Allowed by policy rule {name}.",
                    reasons=call.reasons,
                )
            call.reasons.append(f"rule {name} covers only part of the command; the rest is {residual}")
            return await self._approval(call, level, f"level:{residual}")

        if level <= auto:
            if level is Level.DANGEROUS:
                approver = "AUTO_APPROVE_ALL" if p.auto_approve_all else "policy:auto_approve"
                return Decision(allowed=True, outcome="approved", level=level, rule="auto_approve", approver=approver, reasons=call.reasons)
            outcome: Outcome = "allow" if level is Level.SAFE else "warn"
            return Decision(allowed=True, outcome=outcome, level=level, rule="auto_approve", reasons=call.reasons)
        return await self._approval(call, level, f"level:{level}")

    # ------------------------------------------------------------------ rules

    def _rule_matches(self, rule: Rule, call: _Call) -> tuple[bool, set[int] | None]:
        """Whether ``rule`` applies; for command allow rules also which bash segments it
        covers (None: the whole call)."""
        req = call.req
        if rule.tool and not (
            fnmatchcase(req.tool, rule.tool) or (req.tool_alias is not None and fnmatchcase(req.tool_alias, rule.tool))
        ):
            return False, None
        if rule.access and req.access not in rule.access:
            return False, None
        if rule.path:
            if not call.paths:
                return False, None
            if rule.effect == "allow":
                if not all(glob_match(rule.path, resolved) for _, resolved in call.paths):
                    return False, None
            elif not any(glob_match(rule.path, p) for pair in call.paths for p in pair):
                return False, None
        if rule.command is None and rule.command_regex is None:
            return True, None
        if req.command is None:
            return False, None
        segments = call.bash.segments if call.bash is not None else []
        hits = {i for i, seg in enumerate(segments) if _command_rule_matches(rule, seg.text)}
        if rule.effect == "allow":
            return (True, hits) if hits else (False, None)
        whole = " ".join(req.command.split())
        return (bool(hits) or _command_rule_matches(rule, whole)), None

    def _residual_level(self, call: _Call, allows: list[tuple[str, Rule, set[int] | None]]) -> Level:
        """Level left once allow rules have covered what they match."""
        if call.bash is None or any(covered is None for _, _, covered in allows):
            return Level.SAFE
        covered: set[int] = set().union(*(c for _, _, c in allows if c is not None))
        uncovered = [seg.level for i, seg in enumerate(call.bash.segments) if i not in covered]
        return max([call.bash.residual, *uncovered])

    # ------------------------------------------------------------------ confinement

    def _confinement(self, call: _Call, allows: list[tuple[str, Rule, set[int] | None]], level: Level) -> Decision | None:
        p = self.policy
        req = call.req
        allowed_globs = [rule.path for _, rule, _ in allows if rule.path]
        for requested, resolved in call.paths:
            outside = not is_within(resolved, p.workspace_roots) or (
                requested.startswith("/") and not is_within(requested, p.workspace_roots)
            )
            secret = None
            if req.access == "read" or req.reads:
                secret = is_secret(resolved, p.secret_patterns, p.secret_exceptions) or is_secret(
                    requested, p.secret_patterns, p.secret_exceptions
                )
            if not (outside or secret):
                continue
            lifted = any(glob_match(glob, resolved) for glob in allowed_globs)
            if lifted or self._path_grant(resolved, call.need):
                continue
            if outside:
                return _deny(
                    level,
                    "workspace_roots",
                    f"Path {resolved} is outside the workspace ({', '.join(p.workspace_roots)}).",
                    call.reasons,
                )
            return _deny(
                level,
                "secret_files",
                f"Refusing to read {resolved}: it matches the secret-file pattern {secret!r}. Reading secrets is not permitted.",
                call.reasons,
            )
        return None

    def _path_grant(self, path: str, need: GrantLevel) -> Grant | None:
        return self.grants.match("path", path, need, consume=True)

    # ------------------------------------------------------------------ approval

    def _grant_target(self, call: _Call) -> list[tuple[TargetType, str, GrantLevel]]:
        req = call.req
        if req.command is not None:
            return [("command", req.command.strip(), GrantLevel.EXECUTE)]
        if call.paths:
            return [("path", resolved, call.need) for _, resolved in call.paths]
        if req.domain:
            return [("domain", req.domain, call.need)]
        return [("tool", req.tool, call.need)]

    def _existing_grant(self, call: _Call) -> Grant | None:
        targets = self._grant_target(call)
        # Check without consuming first, so that a once-grant is only used when it decides.
        if all(self.grants.match(t, target, need) for t, target, need in targets):
            found = [self.grants.match(t, target, need, consume=True) for t, target, need in targets]
            return found[0]
        if call.bash is None or not call.bash.segments:
            return None
        covering = {
            i: g
            for i, seg in enumerate(call.bash.segments)
            if (g := self.grants.match("command", seg.text, GrantLevel.EXECUTE)) is not None
        }
        if not covering:
            return None
        uncovered = [seg.level for i, seg in enumerate(call.bash.segments) if i not in covering]
        if max([call.bash.residual, *uncovered]) > self.policy.effective_auto_approve:
            return None
        for i in covering:
            self.grants.match("command", call.bash.segments[i].text, GrantLevel.EXECUTE, consume=True)
        return next(iter(covering.values()))

    def _suggested_grants(self, call: _Call) -> list[Grant]:
        req = call.req
        return [
            Grant(target_type=t, target=target, level=need, description=f"{req.tool_alias or req.tool}: approved for the session")
            for t, target, need in self._grant_target(call)
        ]

    async def _approval(self, call: _Call, level: Level, rule: str) -> Decision:
        req = call.req
        grant = self._existing_grant(call)
        if grant is not None:
            return Decision(
                allowed=True, outcome="approved", level=level, rule=rule, approver=f"grant:{grant.id}",
                message="Approved by a session grant.", reasons=call.reasons,
            )
        why = f"needs approval ({rule})"
        if not call.ask:
            return _deny(level, rule, f"This call {why}; the caller decides again before asking.", call.reasons)
        if self.approval_handler is None:
            return _deny(level, rule, f"This call {why}, and no approval handler is configured.", call.reasons)
        suggested = self._suggested_grants(call)
        request = ApprovalRequest(
            tenant=req.tenant,
            session_id=req.session_id,
            call_id=req.call_id,
            tool=req.tool,
            tool_alias=req.tool_alias,
            level=level,
            rule=rule,
            reasons=call.reasons,
            command=req.command,
            env={name: redact_text(value) for name, value in req.env.items()},
            paths=[resolved for _, resolved in call.paths],
            domain=req.domain,
            access=req.access,
            preview=redact_preview(req.args),
            suggested_grants=suggested,
        )
        answer = await self._ask(request)
        if isinstance(answer, str):
            return _deny(level, rule, answer, call.reasons, approver="approval_handler")
        approver = answer.approver or "approval_handler"
        if answer.decision == "deny":
            return _deny(level, rule, answer.message or "Denied by the approver.", call.reasons, approver=approver)
        created: list[Grant] = []
        if answer.decision == "allow_session":
            for g in answer.grants if answer.grants is not None else suggested:
                created.append(self.grants.add(g.model_copy(update={"granted_by": approver})))
        return Decision(
            allowed=True, outcome="approved", level=level, rule=rule, approver=approver,
            message=answer.message or "", reasons=call.reasons, grants=created,
        )

    async def _ask(self, request: ApprovalRequest) -> ApprovalAnswer | str:
        """The handler's answer, or the reason it gave none (timeout, failure)."""
        assert self.approval_handler is not None
        timeout = self.policy.approval_timeout
        try:
            with anyio.fail_after(timeout):
                return await self.approval_handler(request)
        except TimeoutError:
            return f"No approval within {timeout:g} s; denied."
        except Exception as exc:  # a broken handler must fail closed, not crash the session
            _log.warning("approval_handler_failed", session=request.session_id, call_id=request.call_id, error=repr(exc))
            return f"The approval handler failed ({type(exc).__name__}); denied."

    # ------------------------------------------------------------------ ask_for_permissions

    async def request_permission(
        self,
        grant: Grant,
        *,
        tenant: str,
        session_id: str,
        call_id: str,
        description: str,
        reason: str | None = None,
        tool: str = "ask_for_permissions",
        tool_alias: str | None = None,
    ) -> PermissionAnswer:
        """Back the ask_for_permissions tool: reuse a covering session grant, else ask.

        ``once`` answers store a grant consumed by the first call it approves; ``session``
        answers store it for the rest of the session.
        """
        existing = self.grants.covering(grant)
        if existing is not None:
            return PermissionAnswer(granted=True, scope="once" if existing.once else "session", grant=existing)
        if self.approval_handler is None:
            return PermissionAnswer(granted=False, message="No approval handler is configured; permission denied.")
        level = Level.DANGEROUS if grant.level >= GrantLevel.EXECUTE else Level.CAUTIOUS
        request = ApprovalRequest(
            kind="permission",
            tenant=tenant,
            session_id=session_id,
            call_id=call_id,
            tool=tool,
            tool_alias=tool_alias,
            level=level,
            command=grant.target if grant.target_type == "command" else None,
            paths=[grant.target] if grant.target_type == "path" else [],
            domain=grant.target if grant.target_type == "domain" else None,
            suggested_grants=[grant],
            description=description,
            reason=reason,
        )
        answer = await self._ask(request)
        if isinstance(answer, str):
            return PermissionAnswer(granted=False, message=answer)
        approver = answer.approver or "approval_handler"
        if answer.decision == "deny":
            return PermissionAnswer(granted=False, message=answer.message)
        once = answer.decision == "allow_once"
        chosen = (answer.grants or [grant])[0]
        stored = self.grants.add(chosen.model_copy(update={"once": once, "granted_by": approver}))
        return PermissionAnswer(granted=True, scope="once" if once else "session", message=answer.message, grant=stored)


def _command_rule_matches(rule: Rule, text: str) -> bool:
    if rule.command is not None:
        prefix = " ".join(rule.command.split())
        if text == prefix or text.startswith(prefix + " "):
            return True
    return rule.command_regex is not None and re.fullmatch(rule.command_regex, text, re.DOTALL) is not None


def _deny(
    level: Level,
    rule: str,
    message: str,
    reasons: list[str] | None = None,
    *,
    approver: str | None = None,
    destructive: str | None = None,
) -> Decision:
    return Decision(
        allowed=False, outcome="denied", level=level, rule=rule, approver=approver,
        message=message, reasons=list(reasons or []), destructive=destructive,
    )

