"""Approvals for sessions opened through the API: a dangerous call is put in the store's
queue and waits there until the tenant answers (console or ``POST /approvals/{id}``) or the
timeout passes (then it is denied). The waiting call wakes on an in-process event, and also
re-reads the store every second, so an answer given through another server process that
shares the database reaches it too."""

from __future__ import annotations

import secrets
import time

import anyio

from caisson.logs import get_logger
from caisson.policy import ApprovalAnswer, ApprovalHandler, ApprovalRequest
from caisson.server.models import ApprovalAnswerBody, ApprovalInfo
from caisson.server.store import Store
from caisson.server.tenancy import NotFound

log = get_logger("caisson.server.approvals")

RECHECK = 1.0


class AlreadyAnswered(Exception):
    """Answered 409: the approval was answered, or expired, before this answer came."""


class Approvals:
    def __init__(self, store: Store, timeout: float) -> None:
        self._store = store
        self.timeout = timeout
        self._events: dict[str, anyio.Event] = {}

    def handler(self, tenant_id: str) -> ApprovalHandler:
        async def ask(request: ApprovalRequest) -> ApprovalAnswer:
            return await self._ask(tenant_id, request)

        return ask

    async def _ask(self, tenant_id: str, request: ApprovalRequest) -> ApprovalAnswer:
        info = ApprovalInfo(
            id="ap-" + secrets.token_hex(8), tenant_id=tenant_id, session_id=request.session_id,
            call_id=request.call_id, tool=request.tool_alias or request.tool, level=request.level.value,
            command=request.command, paths=request.paths, preview=request.preview, reasons=request.reasons,
            state="pending", created=time.time(),
        )
        event = self._events[info.id] = anyio.Event()
        try:
            await self._store.add_approval(info)
            log.info("approval asked", tenant=tenant_id, approval=info.id, tool=info.tool, session=info.session_id)
            with anyio.move_on_after(self.timeout):
                while True:
                    with anyio.move_on_after(RECHECK):
                        await event.wait()
                    answered = await self._store.approval(info.id)
                    if answered is not None and answered.state != "pending":
                        return _answer(answered)
            with anyio.CancelScope(shield=True):
                expired = await self._store.answer_approval(info.id, "expired", "no answer in time", None)
                answered = None if expired else await self._store.approval(info.id)
        finally:
            self._events.pop(info.id, None)
        if answered is None:
            return ApprovalAnswer.deny(f"No approval within {self.timeout:g} s; denied.")
        return _answer(answered)  # answered at the last moment

    async def answer(self, tenant_id: str, approval_id: str, body: ApprovalAnswerBody, approver: str) -> ApprovalInfo:
        found = await self.get(tenant_id, approval_id)
        if not await self._store.answer_approval(approval_id, body.decision, body.message, approver):
            raise AlreadyAnswered(f"approval {approval_id} was already {found.state if found.state != 'pending' else 'answered'}")
        event = self._events.get(approval_id)
        if event is not None:
            event.set()
        answered = await self._store.approval(approval_id)
        assert answered is not None
        return answered

    async def get(self, tenant_id: str, approval_id: str) -> ApprovalInfo:
        found = await self._store.approval(approval_id)
        if found is None or found.tenant_id != tenant_id:
            raise NotFound("approval", approval_id, foreign=found is not None)
        return found


def _answer(info: ApprovalInfo) -> ApprovalAnswer:
    approver = info.approver or "api"
    if info.state == "allow_once":
        return ApprovalAnswer.allow_once(approver=approver)
    if info.state == "allow_session":
        return ApprovalAnswer.allow_session(approver=approver)
    return ApprovalAnswer.deny(info.message or "denied by the tenant", approver=approver)
