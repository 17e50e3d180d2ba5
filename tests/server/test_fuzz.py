"""Schemathesis against the served OpenAPI document: every operation, a bounded number of
generated requests each (valid and invalid), with a tenant key (an admin key for the admin
operations) and a live session's id; no answer may be a 5xx."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error

from tests.server.harness import Api, TenantKey, approving
from tests.server.test_api import open_session

# Per operation and generation mode (valid and invalid requests).
EXAMPLES = 15


@pytest.fixture(scope="module")
def fuzz_target(sqlite_api: Api) -> Iterator[tuple[Api, TenantKey, str]]:
    t = sqlite_api.tenant("fuzz", calls_per_minute=100_000, max_sessions=20)
    with t.client() as c:
        sid = open_session(c)
    yield sqlite_api, t, sid
    with t.client() as c:
        for s in c.get("/sessions").json():
            c.delete(f"/sessions/{s['id']}")


def test_no_server_errors(fuzz_target: tuple[Api, TenantKey, str]) -> None:
    api, tenant, sid = fuzz_target
    served = schemathesis.openapi.from_url(f"{api.url}/openapi.json")
    tried: dict[str, int] = {}
    failures: dict[str, str] = {}
    # Generated commands the policy finds dangerous wait for the tenant's approvers: answered at once.
    with approving(tenant, "deny"):
        for result in served.get_all_operations():
            operation = result.ok()
            token = api.admin_token if "admin" in (operation.tags or []) else tenant.token
            for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
                try:
                    fuzz(operation, mode, token, sid, tried)
                except Unsatisfiable:  # no invalid request can be made for some operations
                    continue
                except Exception as exc:  # one operation's failure must not hide the others'
                    failures[f"{operation.label} ({mode.value})"] = str(exc)[:800]
    print(f"operations: {len(tried)}, requests: {sum(tried.values())}, with a 5xx: {len(failures)}")
    for label, text in failures.items():
        print(label, text)
    assert len(tried) >= 30
    assert failures == {}


def fuzz(operation: schemathesis.APIOperation, mode: GenerationMode, token: str, sid: str, tried: dict[str, int]) -> None:
    # Closing the live session early would leave the rest of the run nothing to reach.
    keep = operation.label != "DELETE /sessions/{session_id}"

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def run(case: schemathesis.Case) -> None:
        if keep and case.path_parameters and "session_id" in case.path_parameters:
            case.path_parameters["session_id"] = sid  # a live session, so the calls reach a daemon
        response = case.call(headers={"Authorization": f"Bearer {token}"}, timeout=60)
        tried[operation.label] = tried.get(operation.label, 0) + 1
        case.validate_response(response, checks=[not_a_server_error])

    run()
