"""Audit log: one event per call, the right fields, no secrets, fast record()."""

from __future__ import annotations

import hashlib
import json
import statistics
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from caisson.audit import AuditEvent, AuditLog
from caisson.dispatch import audit_event
from caisson.policy import GrantStore, Level, Policy, PolicyEngine
from caisson.redact import args_digest, canonical_json, redact_preview, redact_text
from tests.policy.conftest import make_call

SECRETS = {
    "github": "ghp_" + "Z9" * 18,
    "aws_id": "AKIAIOSFODNN7EXAMPLE",
    "aws_secret": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "pem_body": "MIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM2",
    "password": "hunter2-very-secret",
    "bearer": "eyJhbGciOi.eyJzdWIiOiIx.SflKxwRJSMeKKF2QT4f",
    "url_pass": "s3cr3tpass",
    "env_pass": "Sup3rS3cretValue",
    "anthropic": "sk-ant-api03-" + "x1Y2" * 10,
    "slack": "xoxb-123456789012-abcdefghijkl",
    "cookie": "session=abcdef0123456789",
}

SECRET_ARGS: dict[str, Any] = {
    "command": (
        f"curl -H 'Authorization: Bearer {SECRETS['bearer']}' https://user:{SECRETS['url_pass']}@api.example.com "
        f"&& export DB_PASSWORD={SECRETS['env_pass']} && git clone https://{SECRETS['github']}@github.com/x/y"
    ),
    "content": (
        f"[default]\naws_access_key_id = {SECRETS['aws_id']}\naws_secret_access_key = {SECRETS['aws_secret']}\n"
        f"-----BEGIN RSA PRIVATE KEY-----\n{SECRETS['pem_body']}\n-----END RSA PRIVATE KEY-----\n"
    ),
    "password": SECRETS["password"],
    "headers": {"Cookie": SECRETS["cookie"], "X-Trace": "ok"},
    "env": [f"ANTHROPIC_API_KEY={SECRETS['anthropic']}", f"SLACK={SECRETS['slack']}"],
}


def event(**overrides: Any) -> AuditEvent:
    fields: dict[str, Any] = {
        "tenant": "acme", "session_id": "s1", "call_id": "c1", "tool": "bash", "tool_alias": "Bash",
        "level": Level.SAFE, "decision": "allow", "rule": "auto_approve",
    }
    fields.update(overrides)
    return AuditEvent(**fields)


@pytest.fixture
def log(tmp_path: Path) -> Any:
    audit = AuditLog.in_directory(tmp_path / "audit")
    yield audit
    audit.close()


def test_one_event_per_call_with_all_fields(log: AuditLog, tmp_path: Path) -> None:
    args = {"command": "ls -la", "timeout": 1000}
    log.record(
        event(call_id="c42", duration_ms=12.5, outcome="ok", bytes_in=10, bytes_out=2048, approver=None),
        args=args,
    )
    log.flush()
    [stored] = log.query(session="s1")
    assert stored.call_id == "c42"
    assert (stored.tenant, stored.tool, stored.tool_alias, stored.level, stored.decision) == ("acme", "bash", "Bash", Level.SAFE, "allow")
    assert (stored.rule, stored.duration_ms, stored.outcome, stored.bytes_in, stored.bytes_out) == ("auto_approve", 12.5, "ok", 10, 2048)
    assert stored.args_sha256 == hashlib.sha256(b'{"command":"ls -la","timeout":1000}').hexdigest()
    assert "ls -la" in stored.preview
    assert stored.time.tzinfo is not None
    lines = (tmp_path / "audit" / "audit.jsonl").read_text().splitlines()
    assert len(lines) == 1
    line = json.loads(lines[0])
    assert line["event"] == "tool_call"
    assert line["severity"] == "info"
    for key in ("time", "tenant", "session_id", "call_id", "tool", "tool_alias", "level", "decision", "rule",
                "approver", "args_sha256", "preview", "duration_ms", "outcome", "bytes_in", "bytes_out"):
        assert key in line, key
    assert line["args_sha256"] == stored.args_sha256


def test_no_secret_reaches_the_log_files(tmp_path: Path) -> None:
    directory = tmp_path / "audit"
    audit = AuditLog.in_directory(directory)
    audit.record(event(decision="denied", message=f"refused: token {SECRETS['github']}"), args=SECRET_ARGS)
    audit.close()
    [stored] = AuditLog.in_directory(directory).query()
    assert stored.args_sha256 == args_digest(SECRET_ARGS)
    blob = b"".join(p.read_bytes() for p in directory.iterdir())
    for name, secret in SECRETS.items():
        assert secret.encode() not in blob, name
        assert secret not in stored.preview, name
    assert b"tool_call" in blob


@pytest.mark.parametrize("name", sorted(SECRETS))
def test_redact_preview_masks_each_kind(name: str) -> None:
    preview = redact_preview(SECRET_ARGS, limit=100_000)
    assert SECRETS[name] not in preview


def test_redaction_keeps_harmless_text() -> None:
    assert redact_text("git commit -m 'fix tokenizer'") == "git commit -m 'fix tokenizer'"
    preview = redact_preview({"file_path": "/workspace/a.py", "max_tokens": 5, "author_name": "Ann"})
    assert "/workspace/a.py" in preview and "Ann" in preview
    assert "***" in redact_preview({"apiKey": "abc", "client_secret": "def"})


def test_preview_is_short_and_a_cut_never_shows_half_a_secret() -> None:
    token = "ghp_" + "Q" * 40
    preview = redact_preview({"content": "x" * 100 + token + "y" * 10_000})
    assert len(preview) <= 240
    assert "ghp_QQQ" not in preview
    key = "-----BEGIN OPENSSH PRIVATE KEY-----\n" + "A" * 5000
    assert "AAAA" not in redact_preview({"content": "head\n" + key})


def test_args_digest_is_canonical() -> None:
    assert args_digest({"b": 1, "a": [1, "é"]}) == args_digest({"a": [1, "é"], "b": 1})
    assert args_digest({"a": 1}) != args_digest({"a": 2})
    expected = hashlib.sha256('{"a":[1,"é"],"b":1}'.encode()).hexdigest()
    assert args_digest({"b": 1, "a": [1, "é"]}) == expected


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(_JSON)
def test_canonical_json_is_sorted_compact_json(value: Any) -> None:
    expected = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert canonical_json(value) == expected


def test_long_strings_are_encoded_in_slices_identically() -> None:
    value = {"content": ('é"\\\n\u2028' * 40_000) + "tail", "n": [1, {"b": 2, "a": "x" * 200_000}]}
    expected = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert canonical_json(value) == expected
    assert args_digest(value) == hashlib.sha256(expected.encode()).hexdigest()


def test_odd_arguments_do_not_stop_the_writer(log: AuditLog) -> None:
    log.record(event(call_id="surrogate"), args={"text": "\ud800 lone surrogate"})
    log.record(event(call_id="object"), args={"when": datetime(2024, 1, 1), "data": b"\x00\x01"})
    log.record(event(call_id="after"))
    log.flush()
    assert [e.call_id for e in log.query()] == ["surrogate", "object", "after"]


def test_query_filters(log: AuditLog) -> None:
    old = datetime.now(UTC) - timedelta(hours=2)
    log.record(event(session_id="s1", call_id="a", tool="read_file", tool_alias="Read", time=old))
    log.record(event(session_id="s1", call_id="b", tool="bash", decision="denied", level=Level.DANGEROUS))
    log.record(event(session_id="s2", call_id="c", tool="bash", decision="warn", level=Level.CAUTIOUS, tenant="other"))
    log.flush()
    assert [e.call_id for e in log.query()] == ["a", "b", "c"]
    assert [e.call_id for e in log.query(session="s1")] == ["a", "b"]
    assert [e.call_id for e in log.query(tool="bash")] == ["b", "c"]
    assert [e.call_id for e in log.query(tool="Read")] == ["a"]
    assert [e.call_id for e in log.query(decision="denied")] == ["b"]
    assert [e.call_id for e in log.query(since=datetime.now(UTC) - timedelta(hours=1))] == ["b", "c"]
    assert [e.call_id for e in log.query(tenant="other")] == ["c"]
    assert [e.call_id for e in log.query(limit=2)] == ["b", "c"]
    assert [e.call_id for e in log.query(session="s1", decision="denied", tool="bash")] == ["b"]


def test_jsonl_only_log_can_be_queried(tmp_path: Path) -> None:
    audit = AuditLog(tmp_path / "only.jsonl", None)
    audit.record(event(call_id="x", decision="denied"))
    audit.record(event(call_id="y"))
    audit.close()
    reopened = AuditLog(tmp_path / "only.jsonl", None)
    assert [e.call_id for e in reopened.query(decision="denied")] == ["x"]
    reopened.close()


def test_record_is_cheap_even_for_large_arguments(log: AuditLog) -> None:
    big = {"file_path": "/workspace/big.bin", "content": "x" * 2_000_000}
    timings = []
    for i in range(100):
        start = time.perf_counter()
        log.record(event(call_id=f"c{i}"), args=big)
        timings.append(time.perf_counter() - start)
    # A queue put is microseconds; digesting and serialising these arguments on the caller's
    # path takes about 9 ms here (the margin is for a loaded machine).
    assert statistics.median(timings) < 0.001
    log.flush()
    assert len(log.query(limit=1000)) == 100


def test_closed_log_refuses_events(tmp_path: Path) -> None:
    audit = AuditLog.in_directory(tmp_path)
    audit.close()
    audit.close()
    with pytest.raises(RuntimeError):
        audit.record(event())


def test_files_are_private(tmp_path: Path) -> None:
    audit = AuditLog.in_directory(tmp_path / "a")
    audit.close()
    for name in ("audit.jsonl", "audit.sqlite3"):
        assert (tmp_path / "a" / name).stat().st_mode & 0o077 == 0


@pytest.mark.anyio
async def test_every_decision_becomes_one_event(log: AuditLog) -> None:
    engine = PolicyEngine(Policy(), GrantStore())
    calls = [
        make_call("read_file", paths=["/workspace/a.py"]),
        make_call("write_file", paths=["/workspace/a.py"], access="write"),
        make_call("bash", command="rm -rf /", access="execute"),
        make_call("read_file", paths=["/workspace/.env"]),
    ]
    for req in calls:
        decision = await engine.decide(req)
        log.record(audit_event(req, decision, duration_ms=1.0, bytes_out=3), args=req.args)
    log.flush()
    events = log.query(session="s1")
    assert [e.call_id for e in events] == [c.call_id for c in calls]
    assert [(e.decision, e.level, e.rule, e.outcome) for e in events] == [
        ("allow", Level.SAFE, "auto_approve", "ok"),
        ("warn", Level.CAUTIOUS, "auto_approve", "ok"),
        ("denied", Level.DANGEROUS, "destructive:rm-rf-root", "denied"),
        ("denied", Level.SAFE, "secret_files", "denied"),
    ]
    assert all(e.args_sha256 == args_digest(c.args) for e, c in zip(events, calls, strict=True))


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("mysql -uroot -pS3cretPw db", "mysql -uroot -p"),
        ("DBPASS=hunter22 ./run", "DBPASS="),
        ("curl -u alice:wonderland https://x", "curl -u alice:"),
        ("echo gh\"p_\"'" + "a" * 36 + "'", "echo "),
        ("echo YWxpY2U6d29uZGVybGFuZA== | base64 -d", "| base64 -d"),
    ],
)
def test_secrets_in_disguise_are_masked(text: str, kept: str) -> None:
    masked = redact_text(text)
    assert "***" in masked and kept in masked
    for secret in ("S3cretPw", "hunter22", "wonderland", "a" * 36, "YWxpY2U6d29uZGVybGFuZA"):
        assert secret not in masked


def test_ordinary_base64_and_options_are_kept() -> None:
    for text in ("mkdir -p src/a", "echo aGVsbG8gd29ybGQgdGhpcyBpcw==", "git commit -m 'fix tokenizer'"):
        assert redact_text(text) == text
