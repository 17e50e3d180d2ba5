"""Static risk classification of bash command lines.

A command line is **safe** only when every part of it is understood and read-only,
**cautious** when the only effect beyond reading is writing inside the workspace, and
**dangerous** otherwise: unknown programs, deletions, network, interpreters, anything
computed at run time that could change what runs, and anything this module cannot parse.
Compound commands take the highest level of their parts. Known-destructive patterns
(``rm -rf /``, ``mkfs``, ``dd if=``, fork bombs, ``curl … | sh`` …) are reported in
``destructive`` so that the policy can refuse them outright.

The tokenizer is our own (no shlex: it does not know ``$( )``, here-documents or ``[[ ]]``).
It follows bash's quoting rules, recurses into command and process substitutions, and
gives up (dangerous) on constructs it does not model: ``case``, function definitions,
``select``, ``coproc``, arithmetic ``for``, array assignments.

Relative write targets are checked against the caller's working directory when it is
known, otherwise against "somewhere inside the workspace": a ``..`` that may leave it, a
``cd`` to an unknown place or a ``~`` path counts as outside. The check is lexical; symbolic
links inside the container are the container's business.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict

from .levels import Level
from .paths import (
    DEFAULT_PROTECTED_PATHS,
    DEFAULT_SECRET_EXCEPTIONS,
    DEFAULT_SECRET_PATTERNS,
    DEFAULT_WORKSPACE_ROOTS,
    is_secret,
    is_within,
    matches_any,
    normalize,
)

_S, _C, _D = Level.SAFE, Level.CAUTIOUS, Level.DANGEROUS
MAX_COMMAND_LENGTH = 64 * 1024
_MAX_DEPTH = 12
# No real command line has this many commands; past it, analysis stops (dangerous).
_MAX_COMMANDS = 1000


class BashSegment(BaseModel):
    """One command the line runs (quotes removed, words joined by single spaces)."""

    model_config = ConfigDict(frozen=True)

    text: str
    level: Level


class BashClassification(BaseModel):
    """Result of :func:`classify_bash`.

    ``segments`` are the individual commands (including those inside substitutions, behind
    wrappers such as ``timeout`` or run by ``find -exec`` / ``xargs``); ``residual`` is the
    level of the effects that belong to no single command (redirections, variable
    assignments, expansions that can run code, a line that could not be parsed). Allow rules
    and grants that cover commands lower segments, never the residual.
    """

    model_config = ConfigDict(frozen=True)

    level: Level
    reasons: list[str]
    destructive: str | None = None
    segments: list[BashSegment] = []
    residual: Level = Level.SAFE
    parsed: bool = True


# --------------------------------------------------------------------------- tokens


class _ParseError(Exception):
    """The line is not valid bash as far as we can tell, or uses a construct we don't model."""


@dataclass(eq=False)
class _Word:
    raw: str
    # Value after quote removal; None when it depends on an expansion.
    value: str | None
    # Unquoted glob or brace-expansion characters: the word may become other words.
    glob: bool = False
    subs: list[list[_Tok]] = field(default_factory=list)
    # Constructs that can run code by themselves (e.g. arithmetic on variables).
    issues: list[str] = field(default_factory=list)

    @property
    def static(self) -> bool:
        return self.value is not None and not self.glob

    @property
    def text(self) -> str:
        return self.value if self.value is not None else self.raw


@dataclass(eq=False)
class _Op:
    op: str


@dataclass(eq=False)
class _Redir:
    op: str
    target: _Word
    subs: list[list[_Tok]] = field(default_factory=list)
    issues: list[str] = field(default_factory=list)


_Tok = _Word | _Op | _Redir

_CONTROL_OPS = ("&&", "||", "|&", ";;&", ";;", ";&", ";", "&", "|", "(", ")")
_REDIR_OPS = ("<<<", "<<-", "&>>", "<<", ">>", "<&", ">&", "<>", ">|", "&>", "<", ">")
_OPS = sorted(_CONTROL_OPS + _REDIR_OPS, key=len, reverse=True)
_WORD_BREAK = frozenset(" \t\n;&|<>()")
_OP_START = frozenset(";&|<>()")
_ASSIGN_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(\[[^\]]*\])?\+?=")
_FD_RE = re.compile(r"\d+(?=[<>])")
_BRACE_RE = re.compile(r"\{[^{}\s]*(?:,|\.\.)[^{}\s]*\}")
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PARAM_RE = re.compile(
    r"[#!]?(?:[A-Za-z_][A-Za-z0-9_]*(?:\[(?:[@*]|[0-9]+)\])?|[0-9]+|[@*#?$!-])"
    r"(?:(?::?[-+?]|[#%]{1,2}|/[/#%]?|\^{1,2}|,{1,2})(?P<rest>.*))?",
    re.DOTALL,
)
_ANSI_SIMPLE = {
    "a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r",
    "t": "\t", "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?",
}


class _Lexer:
    def __init__(self, src: str, depth: int) -> None:
        if depth > _MAX_DEPTH:
            raise _ParseError("nested too deeply")
        self.src = src
        self.pos = 0
        self.depth = depth
        # Here-documents whose bodies start after the next newline: (redirection, delimiter,
        # strip leading tabs, body is expanded).
        self.heredocs: list[tuple[_Redir, str, bool, bool]] = []

    def peek(self, k: int = 0) -> str:
        i = self.pos + k
        return self.src[i] if i < len(self.src) else ""

    def lex(self, until_paren: bool = False) -> list[_Tok]:
        toks: list[_Tok] = []
        paren = 0
        cmd_start = True
        dbracket = False
        while True:
            c = self.peek()
            if not c:
                if until_paren:
                    raise _ParseError("unterminated $( or <(")
                if self.heredocs:
                    raise _ParseError("unterminated here-document")
                return toks
            if c in " \t":
                self.pos += 1
                continue
            if c == "\\" and self.peek(1) == "\n":
                self.pos += 2
                continue
            if c == "#":
                end = self.src.find("\n", self.pos)
                self.pos = len(self.src) if end < 0 else end
                continue
            if c == "\n":
                self.pos += 1
                toks.append(_Op("\n"))
                self._read_heredocs()
                cmd_start = True
                continue
            if dbracket:
                # Inside [[ ]] these are operators of the test, not of the shell.
                op = next((o for o in ("&&", "||", "<", ">", "(", ")") if self.src.startswith(o, self.pos)), None)
                if op is not None:
                    self.pos += len(op)
                    toks.append(_Word(op, op))
                    continue
            if c in "<>" and self.peek(1) == "(":
                toks.append(self._process_substitution())
                cmd_start = False
                continue
            fd = _FD_RE.match(self.src, self.pos) if c.isdigit() else None
            if fd and not self.src.startswith("(", fd.end() + 1):
                self.pos = fd.end()
            op = next((o for o in _OPS if self.src.startswith(o, self.pos)), None) if self.peek() in _OP_START else None
            if op is not None:
                self.pos += len(op)
                if op in _REDIR_OPS:
                    toks.append(self._redirection(op))
                    continue
                if op == ")" and until_paren and paren == 0:
                    return toks
                paren += {"(": 1, ")": -1}.get(op, 0)
                toks.append(_Op(op))
                cmd_start = True
                continue
            if fd:
                raise _ParseError("file descriptor without redirection")
            word = self._word()
            toks.append(word)
            if cmd_start and word.raw == "[[":
                dbracket = True
            elif word.raw == "]]":
                dbracket = False
            cmd_start = word.raw in _OPENERS or _ASSIGN_RE.match(word.raw) is not None

    # ----------------------------------------------------------------- pieces

    def _process_substitution(self) -> _Word:
        start = self.pos
        self.pos += 2
        inner = self.lex(until_paren=True)
        return _Word(self.src[start : self.pos], None, subs=[inner])

    def _redirection(self, op: str) -> _Redir:
        while self.peek() in (" ", "\t"):
            self.pos += 1
        if not self.peek() or self.peek() in _WORD_BREAK:
            raise _ParseError(f"redirection {op} without a target")
        target = self._word()
        redir = _Redir(op, target)
        if op in ("<<", "<<-"):
            if target.value is None:
                raise _ParseError("here-document delimiter with an expansion")
            quoted = any(q in target.raw for q in "'\"\\")
            self.heredocs.append((redir, target.value, op == "<<-", not quoted))
        return redir

    def _read_heredocs(self) -> None:
        for redir, delimiter, strip_tabs, expand in self.heredocs:
            lines: list[str] = []
            while True:
                if self.pos >= len(self.src):
                    raise _ParseError("unterminated here-document")
                end = self.src.find("\n", self.pos)
                line = self.src[self.pos :] if end < 0 else self.src[self.pos : end]
                self.pos = len(self.src) if end < 0 else end + 1
                if (line.lstrip("\t") if strip_tabs else line) == delimiter:
                    break
                lines.append(line)
            if expand:
                body = _Lexer("\n".join(lines), self.depth + 1)
                body._double_quoted([], redir.subs, redir.issues, terminator=None)
        self.heredocs.clear()

    def _word(self) -> _Word:
        start = self.pos
        buf: list[str] = []
        subs: list[list[_Tok]] = []
        issues: list[str] = []
        dynamic = glob = False
        while self.pos < len(self.src):
            c = self.src[self.pos]
            if c in _WORD_BREAK:
                break
            if c == "\\":
                nxt = self.peek(1)
                if nxt == "\n":
                    self.pos += 2
                elif not nxt:
                    buf.append("\\")
                    self.pos += 1
                else:
                    buf.append(nxt)
                    self.pos += 2
            elif c == "'":
                end = self.src.find("'", self.pos + 1)
                if end < 0:
                    raise _ParseError("unterminated single quote")
                buf.append(self.src[self.pos + 1 : end])
                self.pos = end + 1
            elif c == '"':
                self.pos += 1
                dynamic |= self._double_quoted(buf, subs, issues, terminator='"')
            elif c == "$":
                dynamic |= self._dollar(buf, subs, issues, in_double_quotes=False)
            elif c == "`":
                self._backticks(subs)
                dynamic = True
            else:
                if c in "*?" or (c == "{" and _BRACE_RE.match(self.src, self.pos)) or (c == "[" and self._closes_bracket()):
                    glob = True
                buf.append(c)
                self.pos += 1
        if self.pos == start:
            raise _ParseError(f"unexpected {self.peek()!r}")
        return _Word(self.src[start : self.pos], None if dynamic else "".join(buf), glob, subs, issues)

    def _closes_bracket(self) -> bool:
        """A "[" is a glob only with a "]" later in the same word ("[" alone is the test command)."""
        i = self.pos + 1
        while i < len(self.src) and self.src[i] not in _WORD_BREAK:
            if self.src[i] == "]":
                return True
            i += 1
        return False

    def _double_quoted(
        self, buf: list[str], subs: list[list[_Tok]], issues: list[str], terminator: str | None
    ) -> bool:
        """Scan a "..." body (or an expanded here-document when terminator is None)."""
        dynamic = False
        escapable = "$`\"\\\n" if terminator else "$`\\\n"
        while True:
            if self.pos >= len(self.src):
                if terminator:
                    raise _ParseError("unterminated double quote")
                return dynamic
            c = self.src[self.pos]
            if c == terminator:
                self.pos += 1
                return dynamic
            if c == "\\" and self.peek(1) and self.peek(1) in escapable:
                if self.peek(1) != "\n":
                    buf.append(self.peek(1))
                self.pos += 2
            elif c == "$":
                dynamic |= self._dollar(buf, subs, issues, in_double_quotes=True)
            elif c == "`":
                self._backticks(subs)
                dynamic = True
            else:
                buf.append(c)
                self.pos += 1

    def _dollar(
        self, buf: list[str], subs: list[list[_Tok]], issues: list[str], *, in_double_quotes: bool
    ) -> bool:
        """Handle a ``$`` at self.pos; True when it starts an expansion."""
        nxt = self.peek(1)
        if nxt == "'" and not in_double_quotes:
            buf.append(self._ansi_c())
            return False
        if nxt == '"' and not in_double_quotes:
            # $"..." (locale translation) behaves as "...".
            self.pos += 2
            return self._double_quoted(buf, subs, issues, terminator='"')
        if nxt == "(":
            if self.peek(2) == "(":
                end = self._arithmetic_end(self.pos + 3)
                if end is not None:
                    expr = self.src[self.pos + 3 : end]
                    if re.search(r"[A-Za-z_$`\[]", expr):
                        issues.append("arithmetic expansion on variables can run code")
                    self.pos = end + 2
                    return True
            self.pos += 2
            subs.append(self.lex(until_paren=True))
            return True
        if nxt == "{":
            self._parameter_expansion(issues)
            return True
        if nxt and (nxt.isalnum() or nxt == "_"):
            m = _NAME_RE.match(self.src, self.pos + 1)
            self.pos = m.end() if m and not nxt.isdigit() else self.pos + 2
            return True
        if nxt and nxt in "@*#?$!-":
            self.pos += 2
            return True
        buf.append("$")
        self.pos += 1
        return False

    def _arithmetic_end(self, start: int) -> int | None:
        """Index of the closing "))" of ``$((``, or None when it is ``$( (…) )`` instead."""
        depth = 0
        i = start
        while i < len(self.src):
            c = self.src[i]
            if c == "(":
                depth += 1
            elif c == ")":
                if depth == 0:
                    return i if self.src.startswith("))", i) else None
                depth -= 1
            i += 1
        raise _ParseError("unterminated $((")

    def _parameter_expansion(self, issues: list[str]) -> None:
        i = self.pos + 2
        depth = 1
        while i < len(self.src):
            c = self.src[i]
            if c == "\\":
                i += 2
                continue
            if c in "'\"":
                end = self.src.find(c, i + 1)
                if end < 0:
                    raise _ParseError("unterminated quote in ${...}")
                i = end + 1
                continue
            if self.src.startswith("${", i):
                depth += 1
                i += 2
                continue
            if c == "}":
                depth -= 1
                if depth == 0:
                    break
            i += 1
        else:
            raise _ParseError("unterminated ${")
        content = self.src[self.pos + 2 : i]
        self.pos = i + 1
        m = _PARAM_RE.fullmatch(content)
        rest = (m.group("rest") or "") if m else ""
        if m is None or re.search(r"\$[({]|`|[<>]\(", rest):
            issues.append("parameter expansion that may assign, evaluate or run code")

    def _backticks(self, subs: list[list[_Tok]]) -> None:
        self.pos += 1
        inner: list[str] = []
        while True:
            if self.pos >= len(self.src):
                raise _ParseError("unterminated backquote")
            c = self.src[self.pos]
            if c == "\\" and self.peek(1) in ("`", "\\", "$"):
                inner.append(self.peek(1))
                self.pos += 2
                continue
            self.pos += 1
            if c == "`":
                break
            inner.append(c)
        subs.append(_Lexer("".join(inner), self.depth + 1).lex())

    def _ansi_c(self) -> str:
        """Decode $'...' so that ``$'\\x72m'`` is seen as ``rm``."""
        i = self.pos + 2
        out: list[str] = []
        src = self.src
        while i < len(src):
            c = src[i]
            if c == "'":
                self.pos = i + 1
                return "".join(out)
            if c != "\\" or i + 1 >= len(src):
                out.append(c)
                i += 1
                continue
            e = src[i + 1]
            i += 2
            if e in _ANSI_SIMPLE:
                out.append(_ANSI_SIMPLE[e])
            elif e in "01234567":
                m = re.match(r"[0-7]{0,2}", src[i:])
                digits = e + (m.group() if m else "")
                out.append(chr(int(digits, 8)))
                i += len(digits) - 1
            elif e in "xuU":
                width = {"x": 2, "u": 4, "U": 8}[e]
                m = re.match(rf"[0-9A-Fa-f]{{1,{width}}}", src[i:])
                if m:
                    out.append(chr(min(int(m.group(), 16), 0x10FFFF)))
                    i += len(m.group())
                else:
                    out.append("\\" + e)
            elif e == "c" and i < len(src):
                out.append(chr(ord(src[i]) & 0x1F))
                i += 1
            else:
                out.append("\\" + e)
        raise _ParseError("unterminated $'...'")


# --------------------------------------------------------------------------- parser


_OPENERS = frozenset({"{", "!", "time", "if", "then", "elif", "else", "while", "until", "do"})
_UNSUPPORTED_WORDS = {"case": "case statement", "select": "select loop", "function": "function definition", "coproc": "coproc"}


@dataclass(eq=False)
class _Simple:
    assigns: list[_Word]
    words: list[_Word]
    redirs: list[_Redir]
    pipeline: int
    stage: int
    # "cmd", "cond" ([[ … ]]) or "for" (loop header: assigns = [variable], words = list).
    kind: str = "cmd"


def _is_assignment(word: _Word) -> bool:
    return _ASSIGN_RE.match(word.raw) is not None


def _reserved(word: _Word) -> str | None:
    return word.raw if word.value == word.raw else None


def _parse(tokens: list[_Tok]) -> list[_Simple]:
    """Flatten tokens into simple commands in execution order, checking the structure."""
    out: list[_Simple] = []
    stack: list[str] = []
    cur: _Simple | None = None
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

    def new(kind: str = "cmd") -> _Simple:
        return _Simple([], [], [], pipeline, stage, kind)

    while i < len(tokens):
        tok = tokens[i]
        i += 1
        if isinstance(tok, _Redir):
            if cur is None:
                cur = new()
            cur.redirs.append(tok)
            prev = "cmd"
            continue
        if isinstance(tok, _Op):
            op = tok.op
            if op == "(":
                if cur is not None:
                    raise _ParseError("function definition" if len(cur.words) == 1 else "unexpected (")
                stack.append(")")
                prev = "open"
            elif op == ")":
                finish()
                if not stack or stack[-1] != ")":
                    raise _ParseError("unbalanced )")
                stack.pop()
                prev = "cmd"
            elif op in ("|", "|&", "&&", "||", ";", "&"):
                if prev != "cmd":
                    raise _ParseError(f"unexpected {op}")
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
                raise _ParseError("case statement")
            continue
        word = tok
        if cur is None:
            kw = _reserved(word)
            if kw in _UNSUPPORTED_WORDS:
                raise _ParseError(_UNSUPPORTED_WORDS[kw])
            if kw is not None and kw in _KEYWORD_HANDLERS:
                i, prev = _KEYWORD_HANDLERS[kw](tokens, i, stack, out, new)
                continue
            cur = new()
        if not cur.words and cur.kind == "cmd" and _is_assignment(word):
            cur.assigns.append(word)
        else:
            cur.words.append(word)
        prev = "cmd"
    finish()
    if stack:
        raise _ParseError(f"missing {stack[-1].split(':')[0]!r}")
    if prev == "conn":
        raise _ParseError("line ends with an operator")
    return out


_KeywordHandler = Callable[[list[_Tok], int, list[str], list[_Simple], Callable[[str], _Simple]], tuple[int, str]]


def _kw_brace(tokens: list[_Tok], i: int, stack: list[str], out: list[_Simple], new: Callable[[str], _Simple]) -> tuple[int, str]:
    stack.append("}")
    return i, "open"


def _kw_close(expected: tuple[str, ...], replace: str | None = None) -> _KeywordHandler:
    def handler(tokens: list[_Tok], i: int, stack: list[str], out: list[_Simple], new: Callable[[str], _Simple]) -> tuple[int, str]:
        if not stack or stack[-1] not in expected:
            raise _ParseError(f"unexpected {expected[0]}")
        stack.pop()
        if replace is None:
            return i, "cmd"
        stack.append(replace)
        return i, "open"

    return handler


def _kw_push(marker: str) -> _KeywordHandler:
    def handler(tokens: list[_Tok], i: int, stack: list[str], out: list[_Simple], new: Callable[[str], _Simple]) -> tuple[int, str]:
        stack.append(marker)
        return i, "open"

    return handler


def _kw_prefix(tokens: list[_Tok], i: int, stack: list[str], out: list[_Simple], new: Callable[[str], _Simple]) -> tuple[int, str]:
    # "!" and "time" prefix a pipeline; "time -p" takes an option.
    if i < len(tokens) and isinstance(tokens[i], _Word) and tokens[i].raw == "-p":  # type: ignore[union-attr]
        i += 1
    return i, "open"


def _kw_for(tokens: list[_Tok], i: int, stack: list[str], out: list[_Simple], new: Callable[[str], _Simple]) -> tuple[int, str]:
    if i >= len(tokens) or not isinstance(tokens[i], _Word):
        raise _ParseError("arithmetic for loop")
    name = tokens[i]
    assert isinstance(name, _Word)
    if name.value is None or not _NAME_RE.fullmatch(name.raw):
        raise _ParseError("bad for loop variable")
    header = new("for")
    header.assigns.append(name)
    i += 1
    while i < len(tokens) and isinstance(tokens[i], _Op) and tokens[i].op == "\n":  # type: ignore[union-attr]
        i += 1
    if i < len(tokens) and isinstance(tokens[i], _Word) and tokens[i].raw == "in":  # type: ignore[union-attr]
        i += 1
        while i < len(tokens) and isinstance(tokens[i], _Word):
            header.words.append(tokens[i])  # type: ignore[arg-type]
            i += 1
        if i < len(tokens) and isinstance(tokens[i], _Op) and tokens[i].op in (";", "\n"):  # type: ignore[union-attr]
            i += 1
        else:
            raise _ParseError("for loop without do")
    elif i < len(tokens) and isinstance(tokens[i], _Op) and tokens[i].op in (";", "\n"):  # type: ignore[union-attr]
        i += 1
    out.append(header)
    stack.append("done:cond")
    return i, "sep"


def _kw_dbracket(tokens: list[_Tok], i: int, stack: list[str], out: list[_Simple], new: Callable[[str], _Simple]) -> tuple[int, str]:
    cond = new("cond")
    while i < len(tokens):
        tok = tokens[i]
        i += 1
        if isinstance(tok, _Word) and tok.raw == "]]":
            out.append(cond)
            return i, "cmd"
        if not isinstance(tok, _Word):
            raise _ParseError("unexpected operator inside [[ ]]")
        cond.words.append(tok)
    raise _ParseError("missing ]]")


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


# --------------------------------------------------------------------------- analysis


_SENSITIVE_VAR_RE = re.compile(
    r"(?:PATH|CDPATH|ENV|BASH_ENV|IFS|PS[0-4]|PROMPT_COMMAND|SHELLOPTS|BASHOPTS|GLOBIGNORE|"
    r"HOME|SHELL|TMPDIR|EDITOR|VISUAL|PAGER|BROWSER|HISTFILE|INPUTRC|FIGNORE|"
    r"LESS\w*|LD_\w+|DYLD_\w+|GIT_\w+|BASH_\w+|PYTHON\w*|NODE_\w+|NPM_CONFIG_\w+|npm_config_\w+|"
    r"PERL\w*|RUBY\w*|JAVA_\w+|_JAVA_\w+|CLASSPATH|XDG_\w+|SSH_\w+|GREP_\w+|RIPGREP_\w+|"
    r"\w*_PAGER|\w*_EDITOR|\w*PATH|\w*_OPTS|\w*_OPTIONS|\w*_CONFIG\w*)"
)
_STD_BIN_DIRS = frozenset({"/bin", "/usr/bin", "/usr/local/bin", "/sbin", "/usr/sbin", "/usr/local/sbin"})
_SYSTEM_DIRS = frozenset(
    {"/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/opt", "/proc",
     "/root", "/sbin", "/srv", "/sys", "/usr", "/var", "/usr/bin", "/usr/lib", "/usr/local"}
)
_DEV_SINKS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/zero", "/dev/tty", "/dev/fd/1", "/dev/fd/2"})
_BLOCK_DEVICE_RE = re.compile(r"/dev/(?:sd|hd|vd|xvd|nvme|mmcblk|md|dm-|loop|disk/)")
_HOME_RE = re.compile(r'^"?\$(?:HOME|\{HOME\})"?(?:/\*?)?$')
_DOWNLOADERS = frozenset({"curl", "wget", "fetch", "aria2c", "nc", "ncat", "socat"})
_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "fish", "csh", "tcsh", "ash"})
_INTERPRETERS = _SHELLS | frozenset(
    {"python", "python2", "python3", "perl", "ruby", "node", "nodejs", "php", "lua", "eval", "source", ".", "tclsh", "deno", "bun"}
)
_VERSION_PROBES = frozenset(
    {"python", "python3", "node", "ruby", "perl", "go", "rustc", "cargo", "gcc", "cc", "clang",
     "java", "javac", "npm", "pip", "pip3", "bash", "git", "make", "cmake", "uv", "deno", "bun"}
)
_WS = "\x00workspace"  # cwd candidate: somewhere inside the workspace, exact place unknown


@dataclass
class _Seg:
    text: str
    level: Level = _S

    def add(self, level: Level) -> None:
        if level > self.level:
            self.level = level


class _Analyzer:
    def __init__(
        self,
        roots: Sequence[str],
        secret_patterns: Sequence[str],
        secret_exceptions: Sequence[str],
        protected: Sequence[str],
        cwd: str | None,
    ) -> None:
        self.roots = tuple(normalize(r) for r in roots)
        self.secret_patterns = secret_patterns
        self.secret_exceptions = secret_exceptions
        self.protected = protected
        self.cwds: set[str | None] = {normalize(cwd) if cwd and cwd.startswith("/") else _WS}
        self.reasons: list[str] = []
        self.destructive: str | None = None
        self.segments: list[BashSegment] = []
        self.residual = _S
        # Names of commands that ran, per nesting, for "download | shell" detection.
        self.ran: list[str] = []

    # ----------------------------------------------------------------- bookkeeping

    def reason(self, text: str) -> None:
        if text not in self.reasons:
            self.reasons.append(text)

    def flag_destructive(self, name: str, why: str) -> None:
        if self.destructive is None:
            self.destructive = name
        self.reason(f"known-destructive pattern {name}: {why}")

    def effect(self, level: Level, why: str) -> None:
        """An effect outside any single command (redirection, assignment, expansion)."""
        if level > self.residual:
            self.residual = level
        if level > _S:
            self.reason(why)

    def note(self, seg: _Seg, level: Level, why: str) -> None:
        seg.add(level)
        self.reason(why)

    def level(self) -> Level:
        return max([self.residual, *(s.level for s in self.segments)])

    # ----------------------------------------------------------------- paths

    def inside(self, path: str) -> bool:
        """Whether a (static) path is inside the workspace from every possible cwd."""
        if path.startswith("~"):
            return False
        if path.startswith("/"):
            return is_within(path, self.roots)
        for cwd in self.cwds:
            if cwd is None:
                return False
            if cwd == _WS:
                rel = normalize(path)
                if rel == ".." or rel.startswith("../"):
                    return False
            elif not is_within(posixpath.join(cwd, path), self.roots):
                return False
        return True

    def absolute_candidates(self, path: str) -> list[str]:
        if path.startswith("/"):
            return [normalize(path)]
        return [normalize(posixpath.join(c, path)) for c in self.cwds if c not in (None, _WS)] or [normalize(path)]

    def write(self, seg: _Seg | None, word: _Word, what: str) -> None:
        """A write to ``word``; ``seg`` None means it is a redirection (residual)."""

        def note(level: Level, why: str) -> None:
            if seg is None:
                self.effect(level, why)
            else:
                self.note(seg, level, why)

        if word.value is None:
            note(_D, f"{what} a path computed at run time")
            return
        path = word.value
        if path in _DEV_SINKS:
            return
        if path.startswith(("/dev/tcp/", "/dev/udp/")):
            note(_D, f"{what} a network socket")
            return
        if _BLOCK_DEVICE_RE.match(path):
            self.flag_destructive("raw-device-write", f"{what} a block device")
            note(_D, f"{what} a block device")
            return
        if word.glob and re.search(r"(^|/)\.[*?\[]", path):
            note(_D, f"{what} a glob that may match '..'")
            return
        if not self.inside(path):
            note(_D, f"{what} {path} outside the workspace")
            return
        for candidate in self.absolute_candidates(path):
            if matches_any(self.protected, candidate):
                note(_D, f"{what} {candidate}, which can make git run code")
                return
        note(_C, f"{what} the workspace")

    def read(self, seg: _Seg | None, word: _Word) -> None:
        if word.value is None:
            if seg is None:
                self.effect(_D, "reads from a path computed at run time")
            return
        path = word.value
        level, why = _S, ""
        if path.startswith(("/dev/tcp/", "/dev/udp/")):
            level, why = _D, "reads from a network socket"
        elif any(is_secret(p, self.secret_patterns, self.secret_exceptions) for p in self.absolute_candidates(path)):
            level, why = _D, f"reads the secret file {posixpath.basename(path)}"
        if level > _S:
            if seg is None:
                self.effect(level, why)
            else:
                self.note(seg, level, why)

    # ----------------------------------------------------------------- walking

    def run_tokens(self, tokens: list[_Tok]) -> None:
        stages: dict[int, list[tuple[int, list[str]]]] = {}
        for simple in _parse(tokens):
            start = len(self.ran)
            self.simple(simple)
            stages.setdefault(simple.pipeline, []).append((simple.stage, self.ran[start:]))
        for pipeline in stages.values():
            downloaded = False
            for _, names in sorted(pipeline, key=lambda item: item[0]):
                if downloaded and any(n in _INTERPRETERS for n in names):
                    self.flag_destructive("download-piped-to-shell", "the output of a download is run by a shell or interpreter")
                downloaded |= any(n in _DOWNLOADERS for n in names)

    def nested(self, item: _Word | _Redir) -> None:
        """Analyse the substitutions inside a word or here-document (they run first)."""
        for sub in item.subs:
            self.run_tokens(sub)
        for issue in item.issues:
            self.effect(_D, issue)

    def simple(self, s: _Simple) -> None:
        start = len(self.ran)
        for w in (*s.assigns, *s.words):
            self.nested(w)
        for r in s.redirs:
            self.nested(r.target)
            self.nested(r)
        substituted = self.ran[start:]
        for r in s.redirs:
            self.redirection(r)
        if s.kind == "for":
            var = s.assigns[0].raw
            if _SENSITIVE_VAR_RE.fullmatch(var):
                self.effect(_D, f"the loop sets {var}, which changes what later commands run")
            return
        for w in s.assigns:
            self.assignment(w)
        if s.kind == "cond":
            self.condition(s.words)
            return
        if not s.words:
            return
        mid = len(self.ran)
        self.command(s.words)
        if any(n in _DOWNLOADERS for n in substituted) and any(n in _INTERPRETERS for n in self.ran[mid:]):
            self.flag_destructive("download-piped-to-shell", "a shell or interpreter runs the output of a download")

    def assignment(self, word: _Word) -> None:
        m = _ASSIGN_RE.match(word.raw)
        assert m is not None
        name = m.group(1)
        if m.group(2):
            self.effect(_D, f"array element assignment {name}[…] evaluates its subscript")
        elif _SENSITIVE_VAR_RE.fullmatch(name):
            self.effect(_D, f"sets {name}, which changes what later commands run")

    def redirection(self, r: _Redir) -> None:
        op, target = r.op, r.target
        if op in ("<<", "<<-", "<<<"):
            return
        if op in (">&", "<&") and target.value is not None and re.fullmatch(r"\d+-?|-", target.value):
            return
        if op in ("<", "<&"):
            self.read(None, target)
            return
        if op == "<>":
            self.read(None, target)
        self.write(None, target, "redirects output to")

    def condition(self, words: list[_Word]) -> None:
        for i, w in enumerate(words):
            if w.value in ("-eq", "-ne", "-lt", "-le", "-gt", "-ge"):
                operands = words[i - 1 : i] + words[i + 1 : i + 2]
                if any(not _numeric_operand(o) for o in operands):
                    self.effect(_D, "[[ arithmetic comparison evaluates variables, which can run code")

    def command(self, words: list[_Word]) -> None:
        """Classify one command (argv) as a segment of its own."""
        if len(self.segments) >= _MAX_COMMANDS:
            raise _ParseError(f"more than {_MAX_COMMANDS} commands")
        seg = _Seg(" ".join(w.text for w in words))
        self.segments.append(BashSegment(text=seg.text, level=_S))
        index = len(self.segments) - 1
        name = self._dispatch(seg, words)
        self.segments[index] = BashSegment(text=seg.text, level=seg.level)
        if name is not None:
            self.ran.append(name)

    def _dispatch(self, seg: _Seg, words: list[_Word]) -> str | None:
        head = words[0]
        if not head.static:
            self.note(seg, _D, "the command name is computed at run time")
            return None
        name = head.value or ""
        if "/" in name:
            directory, base = posixpath.split(name)
            if normalize(directory) not in _STD_BIN_DIRS:
                self.note(seg, _D, f"runs the program {name}")
                return None
            name = base
        args = words[1:]
        if name.startswith("mkfs") or name in ("mke2fs", "mkswap", "wipefs"):
            self.flag_destructive("mkfs", f"{name} formats a filesystem")
        probe = [w.value for w in args]
        if name in _VERSION_PROBES and (
            probe == ["--version"] or (probe == ["-V"] and name.startswith("python")) or (probe == ["version"] and name == "go")
        ):
            self.note(seg, _S, f"{name}: version query")
            return name
        handler = _HANDLERS.get(name)
        if handler is None:
            self.note(seg, _D, f"{name}: not a known read-only or workspace-only command")
            return name
        handler(self, seg, name, args)
        return name


def _numeric_operand(word: _Word) -> bool:
    if word.value is not None:
        return re.fullmatch(r"-?\d+", word.value) is not None
    return re.fullmatch(r'"?\$[?#$!]"?', word.raw) is not None


# --------------------------------------------------------------------------- argv helpers


@dataclass
class _Argv:
    opts: list[tuple[str, _Word | None]]
    operands: list[_Word]
    # Some argument is computed at run time or globbed, so it could turn out to be an option.
    unsure: bool

    def has(self, *names: str) -> bool:
        return any(_opt_is(o, n) for o, _ in self.opts for n in names)

    def values(self, *names: str) -> list[_Word]:
        return [v for o, v in self.opts if v is not None and any(_opt_is(o, n) for n in names)]


def _opt_is(given: str, name: str) -> bool:
    """``--in-pl`` abbreviates ``--in-place`` for GNU getopt_long; treat prefixes as matches."""
    if given == name:
        return True
    return name.startswith("--") and given.startswith("--") and len(given) > 3 and name.startswith(given)


def _getopt(args: Sequence[_Word], short_values: str = "", long_values: Iterable[str] = ()) -> _Argv:
    long_values = tuple(long_values)
    opts: list[tuple[str, _Word | None]] = []
    operands: list[_Word] = []
    unsure = False
    i = 0
    while i < len(args):
        w = args[i]
        i += 1
        if not w.static:
            unsure = True
            operands.append(w)
            continue
        v = w.value or ""
        if v == "--":
            operands.extend(args[i:])
            unsure |= any(not a.static for a in args[i:])
            break
        if v.startswith("--"):
            name, eq, val = v.partition("=")
            if eq:
                opts.append((name, _Word(val, val)))
            elif any(_opt_is(name, lv) for lv in long_values) and i < len(args):
                opts.append((name, args[i]))
                i += 1
            else:
                opts.append((name, None))
        elif v.startswith("-") and len(v) > 1:
            j = 1
            while j < len(v):
                letter = v[j]
                if letter in short_values:
                    rest = v[j + 1 :]
                    if rest:
                        opts.append(("-" + letter, _Word(rest, rest)))
                    elif i < len(args):
                        opts.append(("-" + letter, args[i]))
                        i += 1
                    else:
                        opts.append(("-" + letter, None))
                    break
                opts.append(("-" + letter, None))
                j += 1
        else:
            operands.append(w)
    return _Argv(opts, operands, unsure)


def _root_like(word: _Word) -> bool:
    """``/``, ``/*``, a system directory, ``~`` or ``$HOME``: never a sane target of rm -r."""
    if word.value is None:
        return _HOME_RE.match(word.raw) is not None
    path = word.value
    if path.startswith("~"):
        path = "/" + path[1:].lstrip("/")
    if not path.startswith("/"):
        return False
    norm = normalize(path)
    if norm.endswith("/*"):
        norm = normalize(norm[:-2] or "/")
    return norm in _SYSTEM_DIRS


# --------------------------------------------------------------------------- handlers

_Handler = Callable[[_Analyzer, _Seg, str, list[_Word]], None]
_HANDLERS: dict[str, _Handler] = {}


def _register(*names: str) -> Callable[[_Handler], _Handler]:
    def deco(fn: _Handler) -> _Handler:
        for n in names:
            _HANDLERS[n] = fn
        return fn

    return deco


_PLAIN = (
    "pwd", "echo", "true", "false", ":", "whoami", "id", "groups", "uname", "arch", "nproc",
    "uptime", "tty", "locale", "printenv", "which", "type", "sleep", "seq", "yes", "test", "[",
    "expr", "basename", "dirname", "realpath", "readlink", "ls", "dir", "vdir", "du", "df", "stat",
    "wc", "ps", "free", "cal", "factor", "getconf", "dirs", "wait", "exit", "return", "jobs",
    "help", "tr", "md5sum", "sha1sum", "sha224sum", "sha256sum", "sha384sum", "sha512sum",
    "b2sum", "cksum", "numfmt", "unset", "shift", "logname", "users", "lsb_release",
)


@_register(*_PLAIN)
def _h_plain(a: _Analyzer, seg: _Seg, name: str, args: list[_Word]) -> None:
    a.note(seg, _S, f"{name}: read-only")


# Commands whose operands are files they print; reading a secret file this way is dangerous.
_READERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "cat": ("", ()),
    "head": ("nc", ("--lines", "--bytes")),
    "tail": ("ncs", ("--lines", "--bytes", "--sleep-interval", "--pid", "--max-unchanged-stats")),
    "tac": ("s", ("--separator",)),
    "nl": ("bdfhilnpsvw", ()),
    "rev": ("", ()),
    "strings": ("nte", ("--bytes", "--radix", "--encoding")),
    "od": ("AjNSstw", ()),
    "hexdump": ("esnC", ()),
    "base64": ("w", ("--wrap",)),
    "base32": ("w", ("--wrap",)),
    "fold": ("w", ("--width",)),
    "paste": ("d", ("--delimiters",)),
    "join": ("aejot12", ()),
    "comm": ("", ("--output-delimiter",)),
    "diff": ("CUFIxSWDXL", ("--label", "--exclude", "--from-file", "--to-file", "--ignore-matching-lines")),
    "cmp": ("iIn", ()),
    "column": ("cstoNRWHdl", ()),
    "expand": ("t", ("--tabs",)),
    "unexpand": ("t", ("--tabs",)),
    "fmt": ("wpg", ()),
    "cut": ("bcdf", ("--bytes", "--characters", "--delimiter", "--fields", "--output-delimiter")),
}


def _h_reader(a: _Analyzer, seg: _Seg, name: str, args: list[_Word]) -> None:
    short, long_ = _READERS[name]
    argv = _getopt(args, short, long_)
    for w in argv.operands:
        if w.value != "-":
            a.read(seg, w)
    a.note(seg, _S, f"{name}: read-only")


for _reader in _READERS:
    _HANDLERS[_reader] = _h_reader


def _unsure_dangerous(a: _Analyzer, seg: _Seg, name: str, argv: _Argv) -> bool:
    if argv.unsure:
        a.note(seg, _D, f"{name}: an argument computed at run time could be an option that writes or runs code")
        return True
    return False


@_register("grep", "egrep", "fgrep", "rg")
def _h_grep(a: _Analyzer, seg: _Seg, name: str, args: list[_Word]) -> None:
    if name == "rg":
        argv = _getopt(args, "eEfgjmABCMtTr", (
            "--regexp", "--file", "--glob", "--iglob", "--type", "--type-not", "--max-count",
            "--after-context", "--before-context", "--context", "--max-columns", "--threads",
            "--replace", "--encoding", "--max-depth", "--max-filesize", "--sort", "--sortr",
            "--type-add", "--color", "--colors", "--path-separator", "--engine", "--pre", "--pre-glob",
        ))
        if _unsure_dangerous(a, seg, name, argv):
            return
        if argv.has("--pre", "--pre-glob"):
            a.note(seg, _D, "rg --pre runs a program on every file")
            return
    else:
        argv = _getopt(args, "efmABCdD", (
            "--regexp", "--file", "--max-count", "--after-context", "--before-context", "--context",
            "--include", "--exclude", "--exclude-dir", "--label", "--binary-files", "--devices",
            "--directories", "--color", "--colour", "--exclude-from",
        ))
    for f in argv.values("-f", "--file"):
        a.read(seg, f)
    files = argv.operands if argv.has("-e", "--regexp", "-f", "--file") else argv.operands[1:]
    for w in files:
        a.read(seg, w)
    a.note(seg, _S, f"{name}: read-only search")


@_register("jq")
def _h_jq(a: _Analyzer, seg: _Seg, name: str, args: list[_Word]) -> None:
    argv = _getopt(args, "f", ("--from-file", "--indent", "--arg", "--argjson"))
    files = argv.operands if argv.has("-f", "--from-file") else argv.operands[1:]
    for w in files:
        a.read(seg, w)
    a.note(seg, _S, "jq: read-only")


@_register("sort")
def _h_sort(a: _Analyzer, seg: _Seg, name: str, args: list[_Word]) -> None:
    argv = _getopt(args, "ktoST", ("--key", "--field-separator", "--output", "--buffer-size",
                                    "--temporary-directory", "--compress-program", "--parallel",
                                    "--files0-from", "--batch-size", "--sort", "--random-source"))
    if _unsure_dangerous(a, seg, name, argv):
        return
    if argv.has("--compress-program"):
        a.note(seg, _D, "sort --compress-program runs a program")
        return
    for w in argv.values("-o", "--output"):
        a.write(seg, w, "sort -o writes")
    for w in argv.operands:
        a.read(seg, w)
    a.note(seg, _S, "sort: read-only")


@_register("uniq", "xxd")
def _h_in_out(a: _Analyzer, seg: _Seg, name: str, args: list[_Word]) -> None:
    """``uniq IN OUT`` and ``xxd IN OUT`` write their second operand."""
    short = "fsw" if name == "uniq" else "cglnosC"
    argv = _getopt(args, short, ("--skip-fields", "--skip-chars", "--check-chars", "--group"))
    if _unsure_dangerous(a, seg, name, argv):
        return
    if argv.operands:
        a.read(seg, argv.operands[0])
    for w in argv.operands[1:2]:
        a.write(seg, w, f"{name} writes its output to")
    a.note(seg, _S, f"{name}: read-only")


@_register("tree")
def _h_tree(a: _Analyzer, seg: _Seg, name: str, args: list[_Word]) -> None:
    argv = _getopt(args, "LPIoHT", ("--charset", "--filelimit", "--timefmt", "--sort", "--fromfile"))
    if _unsure_dangerous(a, seg, name, argv):
        return
    for w in argv.values("-o"):
        a.write(seg, w, "tree -o writes")
    a.note(seg, _S, "tree: read-only")


@_register("file")
def _h_file(a: _Analyzer, seg: _Seg, name: str, args: list[_Word]) -> None:
    argv = _getopt(args, "mfFeP", ("--magic-file", "--files-from", "--separator", "--exclude", "--parameter"))
    if argv.has("-C", "--compile") or _unsure_dangerous(a, seg, name, argv):
        a.note(seg, _D, "file -C writes a compiled magic file")
        return
    a.note(seg, _S, "file: read-only")


@_register("date")
def _h_date(a: _Analyzer, seg: _Seg, name: str, args: list[_Word]) -> None:
    argv = _getopt(args, "dfrI", ("--date", "--file", "--reference"))
    if _unsure_dangerous(a, seg, name, argv):
        return
    if argv.has("-s", "--set"):
        a.note(seg, _D, "date --set changes the clock")
        return
    a.note(seg, _S, "date: read-only")


@_register("hostname")
def _h_hostname(a: _Analyzer, seg: _Seg, name: str, args: list[_Word]) -> None:
    argv = _getopt(args, "F", ("--file",))
    if argv.operands or argv.has("-F", "--file", "-b", "--boot"):
        a.note(seg, _D, "hostname with an argument sets the host name")
        return
    a.note(seg, _S, "hostname: read-only")


@_register("printf")
def _h_printf(a: _Analyzer, seg: _Seg, name: str, args: list[_Word]) -> None:
    if args and args[0].value == "-v":
        target = args[1] if len(args) > 1 else None
        if target is None or target.value is None or _SENSITIVE_VAR_RE.fullmatch(target.value) or not _NAME_RE.fullmatch(target.value):
            a.note(seg, _D, "printf -v assigns a sensitive or computed variable")
            return
    elif args and not args[0].static:
        a.note(seg, _D, "printf: a format computed at run time could be -v")
        return
    a.note(seg, _S, "printf: read-only")


@_register("read")
def _h_read(a: _Analyzer, seg: _Seg, name: str, args: list[_Word]) -> None:
    argv = _getopt(args, "adinNptu")
    names = argv.operands + argv.values("-a")
    if argv.unsure or any(w.value is None or _SENSITIVE_VAR_RE.fullmatch(w.value) for w in names):
        a.note(seg, _D, "read assigns a sensitive or computed variable")
        return
    a.note(seg, _S, "read: sets shell variables")


@_register("export", "declare", "typeset", "local", "readonly")
def _h_declare(a: _Analyzer, seg: _Seg, name: str, args: list[_Word]) -> None:
    allowed = {"-x", "-r", "-p", "-g", "-a", "-A", "-l", "-u", "-t", "+x", "+r", "+t", "--"}
    if name != "export":
        allowed |= {"-f", "-F"}  # declare -f prints functions; export -f exports them
    for w in args:
        if not w.static:
            # NAME=$(…) names its variable statically; only the value is computed.
            m = _ASSIGN_RE.match(w.raw)
            if m is None or m.group(2):
                a.note(seg, _D, f"{name}: an argument computed at run time")
                return
            if _SENSITIVE_VAR_RE.fullmatch(m.group(1)):
                a.note(seg, _D, f"{name} sets {m.group(1)}, which changes what later commands run")
                return
            continue
        v = w.value or ""
        if v.startswith(("-", "+")):
            flags = [v] if v in allowed else [v[0] + ch for ch in v[1:]]
            if any(f not in allowed for f in flags):
                a.note(seg, _D, f"{name} {v}: evaluates or exports code (nameref, integer or function)")
                return
            continue
        var = v.split("=", 1)[0].removesuffix("+")
        if not _NAME_RE.fullmatch(var):
            a.note(seg, _D, f"{name}: assigns something other than a plain variable")
            return
        if _SENSITIVE_VAR_RE.fullmatch(var):
            a.note(seg, _D, f"{name} sets {var}, which changes what later commands run")
            return
    a.note(seg, _S, f"{name}: sets shell variables")


_SET_OPTIONS = frozenset({"errexit", "nounset", "pipefail", "xtrace", "verbose", "noclobber", "noglob", "notify", "noexec"})


@_register("set")
def _h_set(a: _Analyzer, seg: _Seg, name: str, args: list[_Word]) -> None:
    i = 0
    while i < len(args):
        w = args[i]
        v = w.value
        if v is None:
            a.note(seg, _D, "set: an argument computed at run time")
            return
        if v == "--":
            break
        if v in ("-o", "+o"):
            opt = args[i + 1].value if i + 1 < len(args) else None
            if opt is not None and opt not in _SET_OPTIONS:
                a.note(seg, _D, f"set -o {opt}")
                return
            i += 2
            continue
        if v[:1] in "-+" and set(v[1:]) <= set("euxvCfnbo") and v[1:]:
            if "o" in v[1:]:
                opt = args[i + 1].value if i + 1 < len(args) else None
                if opt is not None and opt not in _SET_OPTIONS:
                    a.note(seg, _D, f"set -o {opt}")
                    return
                i += 1
            i += 1
            continue
        if v[:1] in "-+":
            a.note(seg, _D, f"set {v}")
            return
        break
    a.note(seg, _S, "set: shell options")


@_register("cd", "pushd", "popd")
def _h_cd(a: _Analyzer, seg: _Seg, name: str, args: list[_Word]) -> None:
    operands = [w for w in args if not (w.static and (w.value or "").startswith("-") and w.value != "-")]
    target = operands[0] if operands else None
    if name == "popd" or target is None or not target.static or (target.value or "").startswith(("~", "-")):
        a.cwds.add(None)
    else:
        path = target.value or ""
        new: set[str | None] = set()
        for cwd in a.cwds:
            if path.startswith("/"):
                new.add(normalize(path))
            elif cwd is None:
                new.add(None)
            elif cwd == _WS:
                rel = normalize(path)
                new.add(None if rel == ".." or rel.startswith("../") else _WS)
            else:
                new.add(normalize(posixpath.join(cwd, path)))
        # Union, not replace: the cd may fail, run conditionally or in a subshell.
        a.cwds |= new
    a.note(seg, _S, f"{name}: changes directory")


# ------------------------------------------------------------------ workspace writes

_WRITE_OPTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "mkdir": ("mZ", ("--mode", "--context")),
    "touch": ("drt", ("--date", "--reference", "--time")),
    "cp": ("StT", ("--target-directory", "--suffix")),
    "mv": ("StT", ("--target-directory", "--suffix")),
    "ln": ("StT", ("--target-directory", "--suffix")),
    "tee": ("", ("--output-error",)),
    "truncate": ("sr", ("--size", "--reference")),
}


@_register(*_WRITE_OPTS)
def _h_write(a: _Analyzer, seg: _Seg, name: str, args: list[_Word]) -> None:
    short, long_ = _WRITE_OPTS[name]
    argv = _getopt(args, short, long_)
    operands = argv.operands
    targets: list[_Word]
    sources: list[_Word] = []
    target_dir = argv.values("-t", "--target-directory")
    if name in ("cp", "mv", "ln"):
        if target_dir:
            targets, sources = target_dir, operands
        elif name == "ln" and len(operands) == 1:
            targets, sources = [_Word(".", ".")], operands
        else:
            targets, sources = operands[-1:], operands[:-1]
        if name == "mv":
            targets = targets + sources  # moving removes the source name
    else:
        targets = operands
    for w in argv.values("-r", "--reference"):
        a.read(seg, w)
    if name == "cp":
        for w in sources:
            a.read(seg, w)
    if name == "ln":
        # A link out of the workspace turns later "workspace" writes into writes elsewhere.
        for w in sources:
            if w.value is None or not a.inside(w.value):
                a.note(seg, _D, "ln links to a path outside the workspace")
    if not targets:
        a.note(seg, _C, f"{name}: writes files")
    for w in targets:
        a.write(seg, w, f"{name} writes")


@_register("chmod")
def _h_chmod(a: _Analyzer, seg: _Seg, name: str, args: list[_Word]) -> None:
    mode_re = re.compile(r"[ugoa]*(?:[-+=][rwxXstugo]*)+(?:,[ugoa]*(?:[-+=][rwxXstugo]*)+)*|[0-7]{1,4}")
    recursive = False
    mode_seen = False
    targets: list[_Word] = []
    for w in args:
        v = w.value
        if v is not None and v in ("-R", "--recursive"):
            recursive = True
        elif v is not None and (v.startswith("--reference=") or (not mode_seen and mode_re.fullmatch(v))):
            mode_seen = True
        elif v is not None and v.startswith("-") and set(v[1:]) <= set("Rcfv"):
            recursive |= "R" in v
        elif v is not None and v.startswith("--"):
            continue
        else:
            targets.append(w)
    if recursive and any(_root_like(w) for w in targets):
        a.flag_destructive("chmod-recursive-root", "recursive permission change on a system directory")
    for w in targets:
        a.write(seg, w, "chmod changes")


@_register("chown", "chgrp")
def _h_chown(a: _Analyzer, seg: _Seg, name: str, args: list[_Word]) -> None:
    argv = _getopt(args, "", ("--reference", "--from"))
    if (argv.has("-R", "--recursive") and any(_root_like(w) for w in argv.operands[1:])) or argv.has("--no-preserve-root"):
        a.flag_destructive("chown-recursive-root", f"recursive {name} on a system directory")
    a.note(seg, _D, f"{name}: changes file ownership")


# ------------------------------------------------------------------ deletes and destruction


@_register("rm")
def _h_rm(a: _Analyzer, seg: _Seg, name: str, args: list[_Word]) -> None:
    argv = _getopt(args)
    recursive = argv.has("-r", "-R", "--recursive")
    if argv.has("--no-preserve-root"):
        a.flag_destructive("rm-rf-root", "rm --no-preserve-root")
    elif recursive and any(_root_like(w) for w in argv.operands):
        a.flag_destructive("rm-rf-root", "recursive delete of /, a system directory or home")
    a.note(seg, _D, "rm: deletes files")


@_register("rmdir", "unlink", "shred", "srm")
def _h_delete(a: _Analyzer, seg: _Seg, name: str, args: list[_Word]) -> None:
    a.note(seg, _D, f"{name}: deletes files")


@_register("dd")
def _h_dd(a: _Analyzer, seg: _Seg, name: str, args: list[_Word]) -> None:
    if any(w.text.startswith("if=") for w in args):
        a.flag_destructive("dd", "dd if= copies raw data")
    a.note(seg, _D, "dd: raw data copy")


@_register("shutdown", "reboot", "halt", "poweroff", "killall5")
def _h_power(a: _Analyzer, seg: _Seg, name: str, args: list[_Word]) -> None:
    a.flag_destructive("shutdown", f"{name} stops the system")
    a.note(seg, _D, f"{name}: stops the system")


@_register("kill", "pkill", "killall")
def _h_kill(a: _Analyzer, seg: _Seg, name: str, args: list[_Word]) -> None:
    if name == "kill":
        pids = [w.value for w in args if w.value is not None and not re.fullmatch(r"-[A-Za-z]+\d*|-\d+|-s|-n|--", w.value)]
        if "-1" in [w.value for w in args[-1:]] or "-1" in pids:
            a.flag_destructive("kill-all", "kill -1 signals every process")
    a.note(seg, _D, f"{name}: signals processes")


# ------------------------------------------------------------------ find, sed, awk

_FIND_VALUE = frozenset(
    ["-name", "-iname", "-path", "-ipath", "-wholename", "-iwholename", "-regex", "-iregex", "-lname", "-ilname", "-type", "-xtype", "-size", "-mtime", "-mmin", "-atime", "-amin", "-ctime", "-cmin", "-newer", "-anewer", "-cnewer", "-user", "-group", "-uid", "-gid", "-perm", "-maxdepth", "-mindepth", "-printf", "-samefile", "-inum", "-links", "-fstype", "-used", "-context", "-regextype", "-files0-from"]
)
_FIND_FLAG = frozenset(
    ["-print", "-print0", "-ls", "-prune", "-quit", "-true", "-false", "-empty", "-executable", "-readable", "-writable", "-nouser", "-nogroup", "-depth", "-d", "-mount", "-xdev", "-noleaf", "-follow", "-ignore_readdir_race", "-noignore_readdir_race", "-daystart", "-not", "-a", "-and", "-o", "-or", "-help", "--help", "-version", "--version", "-warn", "-nowarn", "!", "(", ")", ","]
)


@_register("find")
def _h_find(a: _Analyzer, seg: _Seg, name: str, args: list[_Word]) -> None:
    i = 0
    while i < len(args) and args[i].value in ("-H", "-L", "-P"):
        i += 1
    starts: list[_Word] = []
    effects = False
    while i < len(args) and args[i].static and not (args[i].value or "").startswith(("-", "(", "!")):
        starts.append(args[i])
        i += 1
    while i < len(args):
        w = args[i]
        i += 1
        if not w.static:
            a.note(seg, _D, "find: an argument computed at run time could be -delete or -exec")
            return
        v = w.value or ""
        if v == "-delete":
            if any(_root_like(s) for s in starts):
                a.flag_destructive("rm-rf-root", "find -delete on a system directory")
            a.note(seg, _D, "find -delete deletes files")
            effects = True
        elif v in ("-exec", "-execdir", "-ok", "-okdir"):
            inner: list[_Word] = []
            while i < len(args) and args[i].value not in (";", "+"):
                inner.append(_Word("{}", None) if args[i].value == "{}" else args[i])
                i += 1
            if i >= len(args) or not inner:
                a.note(seg, _D, f"find {v} without a terminated command")
                return
            i += 1
            effects = True
            a.command(inner)
        elif v in ("-fprint", "-fprint0", "-fls", "-fprintf"):
            if i < len(args):
                a.write(seg, args[i], f"find {v} writes")
                effects = True
            i += 2 if v == "-fprintf" else 1
        elif v in _FIND_VALUE or re.fullmatch(r"-newer[aBcmt][aBcmt]", v):
            i += 1
        elif v not in _FIND_FLAG:
            a.note(seg, _D, f"find: unknown primary {v}")
            return
    if not effects:
        a.note(seg, _S, "find: read-only")


@_register("sed")
def _h_sed(a: _Analyzer, seg: _Seg, name: str, args: list[_Word]) -> None:
    # "-i[SUFFIX]" swallows the rest of its bundle as a suffix, so take it out before getopt.
    in_place = False
    plain: list[_Word] = []
    for w in args:
        m = re.fullmatch(r"-([nEsuzr]*)i.*", w.value or "") if w.static else None
        if m:
            in_place = True
            if m.group(1):
                plain.append(_Word("-" + m.group(1), "-" + m.group(1)))
        else:
            plain.append(w)
    argv = _getopt(plain, "efl", ("--expression", "--file", "--line-length"))
    if _unsure_dangerous(a, seg, name, argv):
        return
    known = {"-n", "--quiet", "--silent", "-E", "-r", "--regexp-extended", "-s", "--separate",
             "-u", "--unbuffered", "-z", "--null-data", "--posix", "--debug", "-e", "--expression",
             "-l", "--line-length", "--sandbox", "--follow-symlinks", "-c"}
    for opt, _ in argv.opts:
        if _opt_is(opt, "--in-place"):
            in_place = True
        elif opt in ("-f", "--file") or _opt_is(opt, "--file"):
            a.note(seg, _D, "sed -f: script from a file cannot be checked")
            return
        elif opt not in known and not any(_opt_is(opt, k) for k in known if k.startswith("--")):
            a.note(seg, _D, f"sed: unknown option {opt}")
            return
    scripts = argv.values("-e", "--expression")
    files = argv.operands
    if not scripts:
        if not files:
            a.note(seg, _D, "sed without a script")
            return
        scripts, files = [files[0]], files[1:]
    for script in scripts:
        if script.value is None or not _sed_script_safe(script.value):
            a.note(seg, _D, "sed: script can execute or write files (e, w, r …) or could not be checked")
            return
    for w in files:
        if in_place:
            a.write(seg, w, "sed -i edits")
        else:
            a.read(seg, w)
    if not in_place:
        a.note(seg, _S, "sed: read-only")


def _sed_script_safe(script: str) -> bool:
    # A bracket expression may or may not end an s/// part depending on the sed; accept the
    # script only if it is safe under both readings.
    return _sed_parse(script, brackets=False) and _sed_parse(script, brackets=True)


def _sed_parse(s: str, *, brackets: bool) -> bool:
    n = len(s)
    i = 0

    def delimited(i: int, delim: str) -> int:
        """Index after the closing delimiter of a part starting at i, or -1."""
        while i < n:
            c = s[i]
            if c == "\\":
                i += 2
                continue
            if brackets and c == "[":
                j = i + 1
                if j < n and s[j] == "^":
                    j += 1
                if j < n and s[j] == "]":
                    j += 1
                close = s.find("]", j)
                if close < 0:
                    return -1
                i = close + 1
                continue
            if c == delim:
                return i + 1
            if c == "\n":
                return -1
            i += 1
        return -1

    def address(i: int) -> int:
        if i < n and s[i] == "$":
            return i + 1
        m = re.match(r"[0-9]+(?:~[0-9]+)?", s[i:])
        if m:
            return i + m.end()
        if i < n and s[i] in "/\\":
            delim = s[i] if s[i] == "/" else (s[i + 1] if i + 1 < n else "")
            start = i + 1 if s[i] == "/" else i + 2
            if not delim:
                return -1
            j = delimited(start, delim)
            if j < 0:
                return -1
            while j < n and s[j] in "IM":
                j += 1
            return j
        return i

    while i < n:
        while i < n and s[i] in " \t\n;":
            i += 1
        if i >= n:
            break
        j = address(i)
        if j < 0:
            return False
        if j > i and j < n and s[j] == ",":
            k = j + 1
            if k < n and s[k] in "+~":
                m = re.match(r"[+~][0-9]+", s[k:])
                j = k + m.end() if m else -1
            else:
                j = address(k)
                if j == k:
                    return False
            if j < 0:
                return False
        i = j
        while i < n and s[i] in " \t":
            i += 1
        if i < n and s[i] == "!":
            i += 1
            while i < n and s[i] in " \t":
                i += 1
        if i >= n:
            return False
        c = s[i]
        if c in "pdDnNgGhHxlPz=}{":
            i += 1
        elif c in "qQ":
            i += 1
            m = re.match(r"\s*[0-9]*", s[i:])
            i += m.end() if m else 0
        elif c in "aic":
            # Text commands only print; the text runs to the end of the line.
            end = s.find("\n", i)
            i = n if end < 0 else end
        elif c in "btT:":
            label_end = re.search(r"[;\n]", s[i:])
            i = n if label_end is None else i + label_end.start()
        elif c == "#":
            end = s.find("\n", i)
            i = n if end < 0 else end
        elif c in "sy":
            if i + 1 >= n or s[i + 1] in "\\\n":
                return False
            delim = s[i + 1]
            j = delimited(i + 2, delim)
            if j < 0:
                return False
            j = delimited(j, delim)
            if j < 0:
                return False
            if c == "s":
                while j < n and s[j] in "gpiImM0123456789":
                    j += 1
            i = j
            while i < n and s[i] in " \t":
                i += 1
            if i < n and s[i] not in ";\n}":
                return False
        else:
            # w, W, r, R, e, F, v and anything unknown.
            return False
    return True


@_register("awk", "gawk", "mawk", "nawk")
def _h_awk(a: _Analyzer, seg: _Seg, name: str, args: list[_Word]) -> None:
    argv = _getopt(args, "Fvf", ("--field-separator", "--assign", "--file"))
    if _unsure_dangerous(a, seg, name, argv):
        return
    if argv.has("-f", "--file") or not argv.operands:
        a.note(seg, _D, f"{name}: program from a file cannot be checked")
        return
    for opt, _ in argv.opts:
        if opt not in ("-F", "-v", "--field-separator", "--assign", "--"):
            a.note(seg, _D, f"{name}: option {opt}")
            return
    program = argv.operands[0].value or ""
    # Output redirection and pipes only exist in print/printf statements ("NR > 1" is a test).
    if re.search(r"system|getline|close|fflush|@|\|&|\b(?:print|printf)\b[^;{}\n]*[>|]", program):
        a.note(seg, _D, f"{name}: program may run commands or write files (system, print >, print |, getline)")
        return
    for w in argv.operands[1:]:
        if not re.match(r"[A-Za-z_][A-Za-z0-9_]*=", w.value or ""):
            a.read(seg, w)
    a.note(seg, _S, f"{name}: read-only")


# ------------------------------------------------------------------ git

_GIT_READ = frozenset(
    ["status", "log", "diff", "show", "blame", "annotate", "ls-files", "ls-tree", "rev-parse", "rev-list", "describe", "shortlog", "cat-file", "name-rev", "merge-base", "count-objects", "show-ref", "for-each-ref", "var", "whatchanged", "check-ignore", "check-attr", "version", "help", "show-branch", "diff-tree", "diff-files", "diff-index", "cherry", "range-diff", "verify-commit", "verify-tag", "fsck"]
)
_GIT_WRITE = frozenset(
    ["add", "commit", "checkout", "switch", "restore", "merge", "cherry-pick", "revert", "mv", "apply", "am", "init", "notes", "gc", "rerere", "pack-refs", "repack", "prune-packed", "maintenance"]
)
_GIT_DANGER = {
    "push": "publishes commits to a remote",
    "pull": "fetches from the network and merges",
    "fetch": "fetches from the network",
    "clone": "fetches from the network",
    "clean": "deletes untracked files",
    "rm": "deletes files",
    "submodule": "fetches and runs submodule commands",
    "config": "changes git configuration (hooks, pager, fsmonitor)",
    "filter-branch": "rewrites history by running commands",
    "bisect": "may run commands",
    "difftool": "runs a diff tool",
    "mergetool": "runs a merge tool",
    "send-email": "sends mail",
    "ls-remote": "contacts a remote",
    "archive": "may contact a remote",
    "daemon": "serves repositories",
    "credential": "handles credentials",
}
_GIT_GLOBAL_SAFE = frozenset({"--no-pager", "-P", "--no-optional-locks", "--literal-pathspecs", "--no-replace-objects", "--bare"})


@_register("git")
def _h_git(a: _Analyzer, seg: _Seg, name: str, args: list[_Word]) -> None:
    i = 0
    repo = _Word(".", ".")
    while i < len(args):
        w = args[i]
        if not w.static:
            a.note(seg, _D, "git: an argument computed at run time could be an option or alias")
            return
        v = w.value or ""
        if v == "-C" and i + 1 < len(args):
            repo = args[i + 1]
            i += 2
            continue
        if v in _GIT_GLOBAL_SAFE:
            i += 1
            continue
        if v in ("--version", "--help", "-h"):
            a.note(seg, _S, "git: read-only")
            return
        if v.startswith("-"):
            a.note(seg, _D, f"git {v}: global option can change configuration or what runs")
            return
        break
    if i >= len(args):
        a.note(seg, _S, "git: prints usage")
        return
    sub = args[i].value or ""
    rest = args[i + 1 :]
    if any(not w.static for w in rest):
        # Pathspecs and messages may be variables; options could hide behind them.
        if sub in _GIT_READ and sub not in ("diff", "log", "show", "grep", "whatchanged"):
            a.note(seg, _S, f"git {sub}: read-only")
            return
        a.note(seg, _D, f"git {sub}: an argument computed at run time could be an option")
        return
    values = [w.value or "" for w in rest]
    level, why = _git_subcommand(sub, values)
    if level is _C:
        a.write(seg, repo, f"git {sub} modifies the repository in")
        if sub == "init":
            for w in rest:
                if not (w.value or "").startswith("-"):
                    a.write(seg, w, "git init creates a repository in")
    else:
        a.note(seg, level, f"git {sub}: {why}")
    for v in values:
        if v.startswith("--output="):
            a.write(seg, _Word(v[9:], v[9:]), f"git {sub} --output writes")


def _git_subcommand(sub: str, values: list[str]) -> tuple[Level, str]:
    def has(*flags: str) -> bool:
        return any(v == f or v.startswith(f + "=") for v in values for f in flags)

    positional = [v for v in values if not v.startswith("-")]
    if sub in _GIT_DANGER:
        if sub == "config" and values and all(
            v.startswith("-") and v in ("--get", "--get-all", "--get-regexp", "--list", "-l", "--show-origin",
                                         "--show-scope", "--global", "--local", "--system", "--null", "-z",
                                         "--name-only", "--type=bool", "--type=int", "--bool", "--int")
            for v in values[: len(values) - len(positional)]
        ) and has("--get", "--get-all", "--get-regexp", "--list", "-l"):
            return _S, "reads configuration"
        return _D, _GIT_DANGER[sub]
    if sub == "grep":
        if any(v.startswith(("-O", "--open-files-in-pager")) for v in values):
            return _D, "opens matches in a pager program"
        return _S, "read-only"
    if sub in ("diff", "log", "show", "whatchanged"):
        if has("--ext-diff", "--textconv"):
            return _D, "runs an external diff or textconv program"
        if "--output" in values:
            return _D, "writes its output to a file"
        return _S, "read-only"
    if sub in _GIT_READ:
        return _S, "read-only"
    if sub == "branch":
        if has("-d", "-D", "--delete"):
            return _D, "deletes a branch"
        if has("--edit-description"):
            return _D, "runs an editor"
        if has("-m", "-M", "-c", "-C", "--move", "--copy", "-u", "--set-upstream-to", "--unset-upstream", "-f", "--force", "-t", "--track"):
            return _C, "changes branches"
        if positional and not has("-l", "--list", "--contains", "--no-contains", "--merged", "--no-merged", "--points-at"):
            return _C, "creates a branch"
        return _S, "lists branches"
    if sub == "tag":
        if has("-d", "--delete"):
            return _D, "deletes a tag"
        if positional and not has("-l", "--list", "--contains", "--no-contains", "--merged", "--no-merged", "--points-at"):
            return _C, "creates a tag"
        return _S, "lists tags"
    if sub == "remote":
        if not positional or positional[0] == "get-url":
            return _S, "lists remotes"
        if positional[0] in ("add", "rename", "remove", "rm", "set-url", "set-head", "set-branches"):
            return _C, "changes remotes"
        return _D, "contacts a remote"
    if sub == "stash":
        action = positional[0] if positional else "push"
        if action in ("list", "show"):
            return _S, "reads stashes"
        if action in ("drop", "clear"):
            return _D, "deletes stashed changes"
        return _C, "stashes changes"
    if sub == "reflog":
        action = positional[0] if positional else "show"
        return (_S, "reads the reflog") if action in ("show", "exists") else (_D, "expires reflog entries")
    if sub == "worktree":
        return (_S, "lists worktrees") if positional[:1] == ["list"] else (_D, "manages worktrees")
    if sub == "reset":
        if has("--hard", "--merge", "--keep"):
            return _D, "discards uncommitted work"
        return _C, "moves HEAD"
    if sub == "rebase":
        if has("-i", "--interactive", "-x", "--exec", "--edit-todo"):
            return _D, "interactive rebase or --exec runs commands"
        return _C, "rewrites commits"
    if sub == "apply" and has("--unsafe-paths"):
        return _D, "applies a patch outside the repository"
    if sub in _GIT_WRITE:
        return _C, "modifies the repository"
    return _D, "unknown subcommand or alias"


# ------------------------------------------------------------------ wrappers and interpreters


def _run_inner(a: _Analyzer, seg: _Seg, wrapper: str, inner: list[_Word]) -> None:
    if inner:
        a.note(seg, _S, f"{wrapper}: runs a command")
        a.command(inner)
    else:
        a.note(seg, _S, f"{wrapper}: read-only")


@_register("nice", "nohup", "time", "timeout", "stdbuf", "command", "builtin", "exec", "busybox", "ionice")
def _h_wrapper(a: _Analyzer, seg: _Seg, name: str, args: list[_Word]) -> None:
    i = 0
    if name == "command" and any(w.value in ("-v", "-V") for w in args[:1]):
        a.note(seg, _S, "command -v: looks a name up")
        return
    value_opts = {
        "nice": {"-n", "--adjustment"},
        "timeout": {"-s", "--signal", "-k", "--kill-after"},
        "time": {"-f", "--format", "-o", "--output"},
        "stdbuf": {"-i", "-o", "-e"},
        "exec": {"-a"},
        "ionice": {"-c", "-n", "-p", "-P", "-u", "--class", "--classdata"},
    }.get(name, set())
    while i < len(args):
        w = args[i]
        v = w.value
        if v is None:
            a.note(seg, _D, f"{name}: the command is computed at run time")
            return
        if v == "--":
            i += 1
            break
        if not v.startswith("-") or v == "-":
            break
        if name == "time" and (v in ("-o", "--output") or v.startswith("--output=")):
            target = _Word(v.split("=", 1)[1], v.split("=", 1)[1]) if "=" in v else (args[i + 1] if i + 1 < len(args) else _Word(".", "."))
            a.write(seg, target, "time -o writes")
        if v in value_opts:
            i += 2
            continue
        i += 1
    if name == "timeout":
        i += 1  # the duration
    _run_inner(a, seg, name, args[i:])


@_register("env")
def _h_env(a: _Analyzer, seg: _Seg, name: str, args: list[_Word]) -> None:
    i = 0
    while i < len(args):
        w = args[i]
        v = w.value
        if v is None:
            a.note(seg, _D, "env: an argument computed at run time")
            return
        if v in ("-i", "--ignore-environment", "-0", "--null", "-"):
            i += 1
        elif v in ("-u", "--unset"):
            i += 2
        elif v.startswith("--unset=") or (v.startswith("-u") and len(v) > 2):
            i += 1
        elif v == "--":
            i += 1
            break
        elif v.startswith("-"):
            a.note(seg, _D, f"env {v}: splits or changes how the command runs")
            return
        elif _ASSIGN_RE.match(v):
            var = _ASSIGN_RE.match(v).group(1)  # type: ignore[union-attr]
            if _SENSITIVE_VAR_RE.fullmatch(var):
                a.note(seg, _D, f"env sets {var}, which changes what the command runs")
            i += 1
        else:
            break
    _run_inner(a, seg, name, args[i:])


@_register("sudo", "doas", "su", "runuser", "chroot", "unshare", "nsenter", "setsid")
def _h_privileged(a: _Analyzer, seg: _Seg, name: str, args: list[_Word]) -> None:
    a.note(seg, _D, f"{name}: runs a command with other privileges or namespaces")
    value_opts = {"-u", "-g", "-h", "-p", "-r", "-t", "-C", "-D", "-U", "-T"}
    i = 0
    while i < len(args) and (args[i].value or "").startswith("-"):
        i += 2 if args[i].value in value_opts else 1
    if name in ("sudo", "doas", "setsid") and i < len(args) and args[i].static:
        a.command(args[i:])


@_register("xargs")
def _h_xargs(a: _Analyzer, seg: _Seg, name: str, args: list[_Word]) -> None:
    value_opts = {"-I", "-L", "-l", "-n", "-P", "-s", "-d", "-E", "-e", "-a", "--arg-file", "--delimiter",
                  "--max-args", "--max-procs", "--max-lines", "--max-chars", "--eof", "--replace", "--process-slot-var"}
    i = 0
    replace: str | None = None
    while i < len(args):
        v = args[i].value
        if v is None:
            a.note(seg, _D, "xargs: an argument computed at run time")
            return
        if not v.startswith("-"):
            break
        if v in ("-a", "--arg-file") and i + 1 < len(args):
            a.read(seg, args[i + 1])
        if v == "-I" and i + 1 < len(args):
            replace = args[i + 1].value
        elif v.startswith("-I") and len(v) > 2:
            replace = v[2:]
        elif v == "-i" or v.startswith(("-i", "--replace")):
            replace = "{}"
        i += 2 if v in value_opts else 1
    inner = args[i:] or [_Word("echo", "echo")]
    if replace:
        inner = [_Word(w.raw, None) if w.value and replace in w.value else w for w in inner]
    # The arguments xargs appends come from input: they could be anything, options included.
    a.note(seg, _S, "xargs: runs a command on its input")
    a.command([*inner, _Word("<input>", None)])


@_register(*_SHELLS, "eval", "source", ".")
def _h_shell(a: _Analyzer, seg: _Seg, name: str, args: list[_Word]) -> None:
    a.note(seg, _D, f"{name}: runs a script")
    script: str | None = None
    if name == "eval":
        if args and all(w.value is not None for w in args):
            script = " ".join(w.value or "" for w in args)
    else:
        for i, w in enumerate(args):
            v = w.value or ""
            if v.startswith("-") and "c" in v[1:] and not v.startswith("--"):
                if i + 1 < len(args) and args[i + 1].value is not None:
                    script = args[i + 1].value
                break
            if not v.startswith("-"):
                break
    if script is not None:
        # Classified for its commands and destructive patterns; the shell stays dangerous
        # (BASH_ENV, functions and aliases may change what the string runs).
        _analyze_text(a, script, depth=1)


def _analyze_text(a: _Analyzer, text: str, depth: int) -> None:
    try:
        tokens = _Lexer(text, depth).lex()
        a.run_tokens(tokens)
    except _ParseError as exc:
        a.effect(_D, f"unparseable script ({exc})")
        hit = _backstop(text)
        if hit:
            a.flag_destructive(hit, "matched in text that could not be parsed")


# --------------------------------------------------------------------------- backstop

# Every pattern here runs in linear time (possessive quantifiers, bounded or per-segment
# scans): the text can be 64 KiB of an agent's choosing.
_CMD_POS = (
    r"(?:^|[;&|(){}\n`]|\$\()\s*+"
    r"(?:(?:sudo|doas|command|builtin|exec|nohup|nice|time|env|busybox|xargs)\s++(?:-\S++\s++)*+)*+"
    r"(?:[^\s/;&|(){}\n`$]*+/)*+"
)
_FORK_BOMB_RE = re.compile(
    r"(?<![\w:.-])([A-Za-z_:][\w:.-]*+)\s*+\(\s*+\)\s*+\{[^}]{0,200}?(?<![\w:.-])\1\s*+\|\s*+&?\s*+\1\s*+&"
)
_RM_ROOT_RE = re.compile(
    _CMD_POS + r"rm((?:\s++-\S++)*+)\s++['\"]?(?:/|/\*|~/?\*?|\$\{?HOME\}?/?\*?)['\"]?(?=\s|$|[;&|)])"
)
_FORMAT_RE = re.compile(_CMD_POS + r"(?:mkfs(?:\.\w++)?|mke2fs|mkswap|wipefs)\b")
_DD_RE = re.compile(_CMD_POS + r"dd\s[^;&|\n]*?\bif=")
_PERMS_RE = re.compile(_CMD_POS + r"(?:chmod|chown)\s([^;&|\n]*+)")
_DOWNLOAD_RE = re.compile(r"\b(?:curl|wget|fetch)\b")
_PIPE_TO_SHELL_RE = re.compile(
    r"\|\s*+(?:sudo\s++(?:-\S++\s++)*+)?(?:[^\s/|]*+/)*+"
    r"(?:(?:ba|z|da|k|c|tc|fi|a)?sh|python[0-9.]*+|perl|ruby|node|php)\b"
)


def _backstop(text: str) -> str | None:
    """Destructive patterns in text the parser could not take apart."""
    if _FORK_BOMB_RE.search(text):
        return "fork-bomb"
    if "--no-preserve-root" in text:
        return "rm-rf-root"
    for m in _RM_ROOT_RE.finditer(text):
        if re.search(r"(?:^|\s)(?:-[a-zA-Z]*[rR][a-zA-Z]*|--recursive)(?=\s|$)", m.group(1)):
            return "rm-rf-root"
    if _FORMAT_RE.search(text):
        return "mkfs"
    if _DD_RE.search(text):
        return "dd"
    for m in _PERMS_RE.finditer(text):
        args = m.group(1)
        if re.search(r"(?:^|\s)(?:-[a-zA-Z]*R|--recursive)", args) and re.search(r"(?:^|\s)['\"]?/['\"]?(?:\s|$)", args):
            return "chmod-recursive-root"
    for chunk in re.split(r"[\n;&]", text):
        found = _DOWNLOAD_RE.search(chunk)
        if found and _PIPE_TO_SHELL_RE.search(chunk, found.end()):
            return "download-piped-to-shell"
    return None


# --------------------------------------------------------------------------- entry point


def classify_bash(
    command: str,
    *,
    cwd: str | None = None,
    workspace_roots: Sequence[str] = DEFAULT_WORKSPACE_ROOTS,
    secret_patterns: Sequence[str] = DEFAULT_SECRET_PATTERNS,
    secret_exceptions: Sequence[str] = DEFAULT_SECRET_EXCEPTIONS,
    protected_paths: Sequence[str] = DEFAULT_PROTECTED_PATHS,
) -> BashClassification:
    """Classify a bash command line (see the module docstring for the rules)."""
    a = _Analyzer(workspace_roots, secret_patterns, secret_exceptions, protected_paths, cwd)
    parsed = True
    if len(command) > MAX_COMMAND_LENGTH:
        a.effect(_D, "command too long to analyse")
        parsed = False
        hit = _backstop(command)
        if hit:
            a.flag_destructive(hit, "matched in text that was not analysed")
    elif "\x00" in command:
        a.effect(_D, "command contains a NUL byte")
        parsed = False
    else:
        try:
            tokens = _Lexer(command, 0).lex()
            a.run_tokens(tokens)
        except _ParseError as exc:
            a.reasons.clear()
            a.segments.clear()
            a.residual = _D
            a.reason(f"cannot be parsed ({exc})")
            parsed = False
            hit = _backstop(command)
            if hit:
                a.flag_destructive(hit, "matched in text that could not be parsed")
    if a.destructive is not None:
        a.residual = _D
    level = a.level()
    reasons = a.reasons or ([f"{level.value}: nothing to run"] if level is _S else [])
    return BashClassification(
        level=level,
        reasons=reasons,
        destructive=a.destructive,
        segments=a.segments,
        residual=a.residual,
        parsed=parsed,
    )


def check_exec_metacharacters(command: str) -> str | None:
    """Seed 004's shell tool runs one executable without a shell and rejects these before
    execution; returns the rejection message, or None when the command is acceptable."""
    for token in (";", "&&", "|", "`", "$("):
        if token in command:
            return f"Shell metacharacters are not allowed (found {token!r}); run a single executable with arguments."
    return None
