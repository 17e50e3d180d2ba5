"""Redaction and digests for the audit log: what of a call's arguments may be kept.

Arguments are never stored whole: an event keeps their SHA-256 over canonical JSON and a
short preview with tokens, keys and passwords masked.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import unicodedata
from collections.abc import Iterator, Mapping
from typing import Any

_MASK = "***"
# Keys whose values are secrets whatever they look like (camelCase is split first).
_SECRET_KEY_RE = re.compile(
    r"(?:^|_)(?:password|passwd|passphrase|pwd|secret|secrets|token|tokens|api_?key|apikey|access_?key|"
    r"secret_?key|private_?key|auth|authorization|credential|credentials|cookie|cookies|session_?token|"
    r"client_?secret|signature|bearer)(?:_|$)"
)
_VALUE_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----.*?(?:-----END[A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----|\Z)", re.S), "[REDACTED PRIVATE KEY]"),
    (re.compile(r"(?i)\b(authorization|proxy-authorization|x-api-key|api-key|x-auth-token|cookie|set-cookie)(\s*[:=]\s*)(?:(bearer|basic|token|digest)\s+)?[^\s'\"]+"), r"\1\2\3 ***"),
    (re.compile(r"(?i)\b(bearer|basic|token)\s+[A-Za-z0-9._~+/=-]{8,}"), r"\1 ***"),
    (re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}\b"), "***AWS-KEY-ID***"),
    (re.compile(r"(?i)(aws_secret_access_key|aws_session_token|secret_access_key)(['\"]?\s*[:=]\s*['\"]?)[A-Za-z0-9/+=]{16,}"), r"\1\2***"),
    # Distinctive prefixes: no word boundary needed (a token glued to other text still counts).
    (re.compile(r"(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})"), _MASK),
    (re.compile(r"glpat-[A-Za-z0-9_-]{20,}"), _MASK),
    (re.compile(r"\bsk-(?:ant-|proj-|live-|test-)?[A-Za-z0-9_-]{16,}"), _MASK),
    (re.compile(r"\b(?:rk|pk|sk)_(?:live|test)_[A-Za-z0-9]{16,}"), _MASK),
    (re.compile(r"xox[abposr]-[A-Za-z0-9-]{10,}"), _MASK),
    (re.compile(r"AIza[0-9A-Za-z_-]{35}"), _MASK),
    (re.compile(r"\bnpm_[A-Za-z0-9]{36}\b"), _MASK),
    (re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"), "***JWT***"),
    # user:password@ in URLs.
    (re.compile(r"(?<![A-Za-z0-9+.-])([A-Za-z][A-Za-z0-9+.-]*+://[^/\s:@]++:)[^/\s@]+@"), r"\1***@"),
    # NAME=value / "name": "value" / --name=value where the name says secret.
    (re.compile(
        r"(?i)((?<![A-Za-z0-9_.-])[A-Za-z0-9_.-]*?(?:password|passwd|passphrase|secret|token|api[_-]?key|access[_-]?key|"
        r"private[_-]?key|credential|client[_-]?secret)[A-Za-z0-9_.-]*+['\"]?\s*[:=]\s*)(['\"]?)[^\s'\"&;,]+"
    ), r"\1\2***"),
    # Names that abbreviate "password": DBPASS=, PGPASS=, MYSQL_PWD=.
    (re.compile(r"(?i)((?<![A-Za-z0-9_.-])[A-Za-z0-9_.-]*?(?:pass|pwd)['\"]?\s*[:=]\s*)(['\"]?)[^\s'\"&;,]+"), r"\1\2***"),
    # mysql -pSECRET (the password glued to the option).
    (re.compile(r"(\b(?:mysql|mysqldump|mysqladmin|mariadb)\b[^\n|;&]*?\s-p)(?!\s)[^\s'\"]+"), r"\1***"),
    # curl -u user:password
    (re.compile(r"(\s(?:-u|--user)\s+['\"]?[^\s:'\"]+:)[^\s'\"]+"), r"\1***"),
    # --password value (separate argument).
    (re.compile(r"(?i)(--?(?:password|passwd|pass|token|secret|api-key|apikey|access-key)\s+)(['\"]?)[^\s'\"]+"), r"\1\2***"),
)
_PREVIEW_LIMIT = 240
_VALUE_LIMIT = 120
# Redact a little more than is shown, so a secret that straddles the cut is still recognised.
_REDACT_WINDOW = 512


_QUOTED_WORD = re.compile(r"\S*['\"\\]\S*")
_BASE64 = re.compile(r"(?<![A-Za-z0-9+/=])[A-Za-z0-9+/]{16,}={0,2}(?![A-Za-z0-9+/=])")


def _mask_patterns(text: str) -> str:
    for pattern, replacement in _VALUE_PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def _unquoted(match: re.Match[str]) -> str:
    """A word a shell would join from quoted pieces (gh'p_'"abc…"): masked whole if the joined
    word holds a secret."""
    word = match.group(0)
    joined = re.sub(r"['\"\\]", "", word)
    return _MASK if _mask_patterns(joined) != joined else word


def _encoded(match: re.Match[str]) -> str:
    """Base64 that decodes to credentials (user:password, a token) is a credential too."""
    blob = match.group(0)
    try:
        decoded = base64.b64decode(blob + "=" * (-len(blob) % 4), validate=True).decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        return blob
    if not decoded.isprintable():
        return blob
    return _MASK if ":" in decoded or _mask_patterns(decoded) != decoded else blob


def redact_text(text: str) -> str:
    """Mask tokens, keys, passwords, bearer headers, AWS keys, private key blocks, and the same
    split by quotes or base64-encoded."""
    text = _mask_patterns(text)
    text = _QUOTED_WORD.sub(_unquoted, text)
    return _BASE64.sub(_encoded, text)


# Characters a terminal would act on or draw misleadingly: controls, bidi overrides and other
# invisible format characters, line and paragraph separators.
_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Co", "Cs"})


def escape_unsafe(text: str) -> str:
    """``text`` with every character a terminal could be fooled by written as ``\\uXXXX``."""
    return "".join(
        f"\\u{ord(c):04x}" if unicodedata.category(c) in _UNSAFE_CATEGORIES and c != "\n" else c for c in text
    )


def _secret_key(key: str) -> bool:
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", key).lower().replace("-", "_")
    return _SECRET_KEY_RE.search(snake) is not None


def _redacted(value: Any, depth: int = 0) -> Any:
    if depth > 6:
        return "…"
    if isinstance(value, Mapping):
        return {
            redact_text(str(k))[:_VALUE_LIMIT]: (_MASK if _secret_key(str(k)) else _redacted(v, depth + 1))
            for k, v in list(value.items())[:50]
        }
    if isinstance(value, (list, tuple)):
        return [_redacted(v, depth + 1) for v in value[:20]]
    if isinstance(value, str):
        shown = redact_text(value[: _VALUE_LIMIT + _REDACT_WINDOW])
        return shown if len(shown) <= _VALUE_LIMIT else shown[:_VALUE_LIMIT] + "…"
    if isinstance(value, (bytes, bytearray)):
        return f"<{len(value)} bytes>"
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return _redacted(str(value), depth + 1)


def redact_preview(args: Mapping[str, Any], limit: int = _PREVIEW_LIMIT, focus: str | None = None) -> str:
    """A short, redacted JSON preview of tool arguments for logs and approval prompts. ``focus``
    (the part of a long command that decided its level) is kept in view when the cut hides it."""
    text = json.dumps(_redacted(args), ensure_ascii=False, sort_keys=True, default=str)
    shown = text if len(text) <= limit else text[: limit - 1] + "…"
    if not focus or redact_text(focus)[:60] in shown:
        return shown
    tail = " … decided by: " + redact_text(focus[: _VALUE_LIMIT + _REDACT_WINDOW])[:_VALUE_LIMIT]
    room = max(0, limit - len(tail))
    return (text if len(text) <= room else text[: max(0, room - 1)] + "…") + tail


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


_CHUNK = 64 * 1024


def _canonical_chunks(value: Any) -> Iterator[str]:
    """The pieces of :func:`canonical_json`, with long strings cut into slices so that the
    writer thread never holds the GIL for long on one huge argument."""
    if isinstance(value, str) and len(value) > _CHUNK:
        yield '"'
        for i in range(0, len(value), _CHUNK):
            # JSON escaping is per character, so slices concatenate to the same text.
            yield _dumps(value[i : i + _CHUNK])[1:-1]
        yield '"'
    elif isinstance(value, Mapping) and all(isinstance(k, str) for k in value):
        yield "{"
        for n, key in enumerate(sorted(value)):
            yield ("," if n else "") + _dumps(key) + ":"
            yield from _canonical_chunks(value[key])
        yield "}"
    elif isinstance(value, (list, tuple)):
        yield "["
        for n, item in enumerate(value):
            if n:
                yield ","
            yield from _canonical_chunks(item)
        yield "]"
    else:
        yield _dumps(value)


def canonical_json(args: Any) -> str:
    """Sorted keys, no whitespace, UTF-8 characters as they are; what args_digest hashes."""
    return "".join(_canonical_chunks(args))


def digest_and_size(args: Any) -> tuple[str, int]:
    digest = hashlib.sha256()
    size = 0
    for chunk in _canonical_chunks(args):
        # surrogatepass: a lone surrogate from a JSON escape must not make an event unwritable.
        data = chunk.encode("utf-8", "surrogatepass")
        digest.update(data)
        size += len(data)
    return digest.hexdigest(), size


def args_digest(args: Any) -> str:
    """SHA-256 (hex) of the arguments' canonical JSON, UTF-8 encoded."""
    return digest_and_size(args)[0]
