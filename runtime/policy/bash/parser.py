"""Bash's grammar, flattened: tokens become simple commands in execution order.

Lists, pipelines, subshells, groups, ``if``, ``while``/``until``, ``for … in`` and ``[[ ]]``
are followed; ``case``, ``select``, functions, ``coproc`` and arithmetic ``for`` raise
:class:`ParseError` (the caller then calls the line dangerous).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .lexer import ASSIGN_RE, MAX_NESTING, NAME_RE, Op, ParseError, Redir, Tok, Word

_UNSUPPORTED_WORDS = {"case": "case statement", "select": "select loop", "function": "function definition", "coproc": "coproc"}


@dataclass(eq=False)
class Simple:
    assigns: list[Word]
    words: list[Word]
    redirs: list[Redir]
    pipeline: int
    stage: int
    # "cmd", "cond" ([[ … ]]) or "for" (loop header: assigns = [variable], words = list).
    kind: str = "cmd"


def is_assignment(word: Word) -> bool:
    return ASSIGN_RE.match(word.raw) is not None


def _reserved(word: Word) -> str | None:
    return word.raw if word.value == word.raw else None


def parse(tokens: list[Tok]) -> list[Simple]:
    """Flatten tokens into simple commands in execution order, checking the structure."""
    out: list[Simple] = []
    stack: list[str] = []
    cur: Simple | None = None
    pipeline = stage = 0
    # "start" / "sep" (after ; & newline) / "conn" (after && || |) / "open" (after a
    # reserved word that starts a body) / "cmd" (after a command or a closer).
    prev = "start"
    i = 0

    def finish() -> None:
        nonlocal cur
        if cur is not None:
            out.append(cur)
            cur = None

    def new(kind: str = "cmd") -> Simple:
        return Simple([], [], [], pipeline, stage, kind)

    while i < len(tokens):
        if len(stack) > MAX_NESTING:
            raise ParseError("nested too deeply")
        tok = tokens[i]
        i += 1
        if isinstance(tok, Redir):
            if cur is None:
                cur = new()
            cur.redirs.append(tok)
            prev = "cmd"
            continue
        if isinstance(tok, Op):
            op = tok.op
            if op == "(":
                if cur is not None:
                    raise ParseError("function definition" if len(cur.words) == 1 else "unexpected (")
                stack.append(")")
                prev = "open"
            elif op == ")":
                finish()
                if not stack or stack[-1] != ")":
                    raise ParseError("unbalanced )")
                stack.pop()
                prev = "cmd"
            elif op in ("|", "|&", "&&", "||", ";", "&"):
                if prev != "cmd":
                    raise ParseError(f"unexpected {op}")
                finish()
                if op in ("|", "|&"):
                    stage += 1
                else:
                    pipeline += 1
                    stage = 0
                prev = "conn" if op in ("|", "|&", "&&", "||") else "sep"
            elif op == "\n":
                if prev != "conn":
                    finish()
                    pipeline += 1
                    stage = 0
                    if prev == "cmd":
                        prev = "sep"
            else:
                raise ParseError("case statement")
            continue
        word = tok
        if cur is None:
            kw = _reserved(word)
            if kw in _UNSUPPORTED_WORDS:
                raise ParseError(_UNSUPPORTED_WORDS[kw])
            if kw is not None and kw in _KEYWORD_HANDLERS:
                i, prev = _KEYWORD_HANDLERS[kw](tokens, i, stack, out, new)
                continue
            cur = new()
        if not cur.words and cur.kind == "cmd" and is_assignment(word):
            cur.assigns.append(word)
        else:
            cur.words.append(word)
        prev = "cmd"
    finish()
    if stack:
        raise ParseError(f"missing {stack[-1].split(':')[0]!r}")
    if prev == "conn":
        raise ParseError("line ends with an operator")
    return out


_KeywordHandler = Callable[[list[Tok], int, list[str], list[Simple], Callable[[str], Simple]], tuple[int, str]]


def _kw_brace(tokens: list[Tok], i: int, stack: list[str], out: list[Simple], new: Callable[[str], Simple]) -> tuple[int, str]:
    stack.append("}")
    return i, "open"


def _kw_close(expected: tuple[str, ...], replace: str | None = None) -> _KeywordHandler:
    def handler(tokens: list[Tok], i: int, stack: list[str], out: list[Simple], new: Callable[[str], Simple]) -> tuple[int, str]:
        if not stack or stack[-1] not in expected:
            raise ParseError(f"unexpected {expected[0]}")
        stack.pop()
        if replace is None:
            return i, "cmd"
        stack.append(replace)
        return i, "open"

    return handler


def _kw_push(marker: str) -> _KeywordHandler:
    def handler(tokens: list[Tok], i: int, stack: list[str], out: list[Simple], new: Callable[[str], Simple]) -> tuple[int, str]:
        stack.append(marker)
        return i, "open"

    return handler


def _kw_prefix(tokens: list[Tok], i: int, stack: list[str], out: list[Simple], new: Callable[[str], Simple]) -> tuple[int, str]:
    # "!" and "time" prefix a pipeline; "time -p" takes an option.
    if i < len(tokens) and isinstance(tokens[i], Word) and tokens[i].raw == "-p":  # type: ignore[union-attr]
        i += 1
    return i, "open"


def _kw_for(tokens: list[Tok], i: int, stack: list[str], out: list[Simple], new: Callable[[str], Simple]) -> tuple[int, str]:
    if i >= len(tokens) or not isinstance(tokens[i], Word):
        raise ParseError("arithmetic for loop")
    name = tokens[i]
    assert isinstance(name, Word)
    if name.value is None or not NAME_RE.fullmatch(name.raw):
        raise ParseError("bad for loop variable")
    header = new("for")
    header.assigns.append(name)
    i += 1
    while i < len(tokens) and isinstance(tokens[i], Op) and tokens[i].op == "\n":  # type: ignore[union-attr]
        i += 1
    if i < len(tokens) and isinstance(tokens[i], Word) and tokens[i].raw == "in":  # type: ignore[union-attr]
        i += 1
        while i < len(tokens) and isinstance(tokens[i], Word):
            header.words.append(tokens[i])  # type: ignore[arg-type]
            i += 1
        if i < len(tokens) and isinstance(tokens[i], Op) and tokens[i].op in (";", "\n"):  # type: ignore[union-attr]
            i += 1
        else:
            raise ParseError("for loop without do")
    elif i < len(tokens) and isinstance(tokens[i], Op) and tokens[i].op in (";", "\n"):  # type: ignore[union-attr]
        i += 1
    out.append(header)
    stack.append("done:cond")
    return i, "sep"


def _kw_dbracket(tokens: list[Tok], i: int, stack: list[str], out: list[Simple], new: Callable[[str], Simple]) -> tuple[int, str]:
    cond = new("cond")
    parens = 0
    while i < len(tokens):
        tok = tokens[i]
        i += 1
        if isinstance(tok, Word) and tok.raw in ("(", ")"):
            parens += 1 if tok.raw == "(" else -1
            if parens > MAX_NESTING:
                raise ParseError("nested too deeply")
        if isinstance(tok, Word) and tok.raw == "]]":
            out.append(cond)
            return i, "cmd"
        if not isinstance(tok, Word):
            raise ParseError("unexpected operator inside [[ ]]")
        cond.words.append(tok)
    raise ParseError("missing ]]")


_KEYWORD_HANDLERS: dict[str, _KeywordHandler] = {
    "{": _kw_brace,
    "}": _kw_close(("}",)),
    "!": _kw_prefix,
    "time": _kw_prefix,
    "if": _kw_push("fi:if"),
    "then": _kw_close(("fi:if", "fi:elif"), "fi:then"),
    "elif": _kw_close(("fi:then",), "fi:elif"),
    "else": _kw_close(("fi:then",), "fi:else"),
    "fi": _kw_close(("fi:then", "fi:else")),
    "while": _kw_push("done:cond"),
    "until": _kw_push("done:cond"),
    "do": _kw_close(("done:cond",), "done:body"),
    "done": _kw_close(("done:body",)),
    "for": _kw_for,
    "[[": _kw_dbracket,
}
