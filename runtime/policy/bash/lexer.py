"""Bash's lexical layer: words (quotes removed, expansions noted), operators, redirections
and here-documents, recursing into command and process substitutions.

Our own tokenizer (no shlex: it does not know ``$( )``, here-documents or ``[[ ]]``). It
follows bash's quoting rules and raises :class:`ParseError` on what it does not model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

MAX_DEPTH = 12
# Parentheses, groups and compound commands inside one another.
MAX_NESTING = 64
# Reserved words after which a new command starts.
OPENERS = frozenset({"{", "!", "time", "if", "then", "elif", "else", "while", "until", "do"})


# In a word's glob pattern: a part computed at run time (matches anything, "/" included).
# A NUL cannot occur in a command line, so it cannot be confused with a character.
ANY = "\x00"


def escape_glob(text: str) -> str:
    """``text`` as a glob that matches only itself."""
    return re.sub(r"([*?\[\]\\\x00])", r"\\\1", text)


class _Buf:
    """A word being read: its value (quotes removed) and the glob its expansions match."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.pattern: list[str] = []
        # Inside a brace expansion, which the pattern covers with one ANY.
        self.muted = False

    def lit(self, chars: str) -> None:
        self.text.append(chars)
        if not self.muted:
            self.pattern.append(escape_glob(chars))

    def glob(self, char: str) -> None:
        self.text.append(char)
        if not self.muted:
            self.pattern.append(char)

    def expansion(self) -> None:
        if not self.muted:
            self.pattern.append(ANY)


class ParseError(Exception):
    """The line is not valid bash as far as we can tell, or uses a construct we don't model."""


@dataclass(eq=False)
class Word:
    raw: str
    # Value after quote removal; None when it depends on an expansion.
    value: str | None
    # Unquoted glob or brace-expansion characters: the word may become other words.
    glob: bool = False
    subs: list[list[Tok]] = field(default_factory=list)
    # Constructs that can run code by themselves (e.g. arithmetic on variables).
    issues: list[str] = field(default_factory=list)
    # What the word may expand to, as a glob (see :func:`escape_glob`); None: derived from
    # ``value`` (a literal) or, for a computed word, anything at all.
    pattern: str | None = None

    @property
    def glob_pattern(self) -> str:
        """A glob every expansion of the word matches; ANY stands for a computed part."""
        if self.pattern is not None:
            return self.pattern
        return ANY if self.value is None else escape_glob(self.value)

    @property
    def static(self) -> bool:
        return self.value is not None and not self.glob

    @property
    def text(self) -> str:
        return self.value if self.value is not None else self.raw


@dataclass(eq=False)
class Op:
    op: str


@dataclass(eq=False)
class Redir:
    op: str
    target: Word
    subs: list[list[Tok]] = field(default_factory=list)
    issues: list[str] = field(default_factory=list)


Tok = Word | Op | Redir

_CONTROL_OPS = ("&&", "||", "|&", ";;&", ";;", ";&", ";", "&", "|", "(", ")")
_REDIR_OPS = ("<<<", "<<-", "&>>", "<<", ">>", "<&", ">&", "<>", ">|", "&>", "<", ">")
_OPS = sorted(_CONTROL_OPS + _REDIR_OPS, key=len, reverse=True)
_WORD_BREAK = frozenset(" \t\n;&|<>()")
_OP_START = frozenset(";&|<>()")
ASSIGN_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(\[[^\]]*\])?\+?=")
_FD_RE = re.compile(r"\d+(?=[<>])")
_BRACE_RE = re.compile(r"\{[^{}\s]*(?:,|\.\.)[^{}\s]*\}")
NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PARAM_RE = re.compile(
    r"[#!]?(?:[A-Za-z_][A-Za-z0-9_]*(?:\[(?:[@*]|[0-9]+)\])?|[0-9]+|[@*#?$!-])"
    r"(?:(?::?[-+?]|[#%]{1,2}|/[/#%]?|\^{1,2}|,{1,2})(?P<rest>.*))?",
    re.DOTALL,
)
_ANSI_SIMPLE = {
    "a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r",
    "t": "\t", "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?",
}


class Lexer:
    def __init__(self, src: str, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise ParseError("nested too deeply")
        self.src = src
        self.pos = 0
        self.depth = depth
        # Here-documents whose bodies start after the next newline: (redirection, delimiter,
        # strip leading tabs, body is expanded).
        self.heredocs: list[tuple[Redir, str, bool, bool]] = []

    def peek(self, k: int = 0) -> str:
        i = self.pos + k
        return self.src[i] if i < len(self.src) else ""

    def lex(self, until_paren: bool = False) -> list[Tok]:
        if until_paren:
            # $( and <( nest inside one lexer: they count toward the same depth limit.
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise ParseError("nested too deeply")
            try:
                return self._lex(until_paren)
            finally:
                self.depth -= 1
        return self._lex(until_paren)

    def _lex(self, until_paren: bool) -> list[Tok]:
        toks: list[Tok] = []
        paren = 0
        cmd_start = True
        dbracket = False
        while True:
            c = self.peek()
            if not c:
                if until_paren:
                    raise ParseError("unterminated $( or <(")
                if self.heredocs:
                    raise ParseError("unterminated here-document")
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
                toks.append(Op("\n"))
                self._read_heredocs()
                cmd_start = True
                continue
            if dbracket:
                # Inside [[ ]] these are operators of the test, not of the shell.
                op = next((o for o in ("&&", "||", "<", ">", "(", ")") if self.src.startswith(o, self.pos)), None)
                if op is not None:
                    self.pos += len(op)
                    toks.append(Word(op, op))
                    continue
            if c == "(" and self.peek(1) == "(" and cmd_start and not dbracket:
                raise ParseError("arithmetic command (( ))")
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
                toks.append(Op(op))
                cmd_start = True
                continue
            if fd:
                raise ParseError("file descriptor without redirection")
            word = self._word()
            toks.append(word)
            if cmd_start and word.raw == "[[":
                dbracket = True
            elif word.raw == "]]":
                dbracket = False
            cmd_start = word.raw in OPENERS or ASSIGN_RE.match(word.raw) is not None

    # ----------------------------------------------------------------- pieces

    def _process_substitution(self) -> Word:
        start = self.pos
        self.pos += 2
        inner = self.lex(until_paren=True)
        # It expands to a pipe's name (/dev/fd/N), never to a file of the workspace.
        return Word(self.src[start : self.pos], None, subs=[inner], pattern="/dev/fd/63")

    def _redirection(self, op: str) -> Redir:
        while self.peek() in (" ", "\t"):
            self.pos += 1
        if not self.peek() or self.peek() in _WORD_BREAK:
            raise ParseError(f"redirection {op} without a target")
        target = self._word()
        redir = Redir(op, target)
        if op in ("<<", "<<-"):
            if target.value is None:
                raise ParseError("here-document delimiter with an expansion")
            quoted = any(q in target.raw for q in "'\"\\")
            self.heredocs.append((redir, target.value, op == "<<-", not quoted))
        return redir

    def _read_heredocs(self) -> None:
        for redir, delimiter, strip_tabs, expand in self.heredocs:
            lines: list[str] = []
            while True:
                if self.pos >= len(self.src):
                    raise ParseError("unterminated here-document")
                end = self.src.find("\n", self.pos)
                line = self.src[self.pos :] if end < 0 else self.src[self.pos : end]
                self.pos = len(self.src) if end < 0 else end + 1
                if (line.lstrip("\t") if strip_tabs else line) == delimiter:
                    break
                lines.append(line)
            if expand:
                body = Lexer("\n".join(lines), self.depth + 1)
                body._double_quoted(_Buf(), redir.subs, redir.issues, terminator=None)
        self.heredocs.clear()

    def _word(self) -> Word:
        start = self.pos
        buf = _Buf()
        subs: list[list[Tok]] = []
        issues: list[str] = []
        dynamic = glob = in_class = False
        brace_end = -1
        while self.pos < len(self.src):
            c = self.src[self.pos]
            if c in _WORD_BREAK:
                break
            if buf.muted and self.pos >= brace_end:
                buf.muted = False
            if c == "\\":
                nxt = self.peek(1)
                if nxt == "\n":
                    self.pos += 2
                elif not nxt:
                    buf.lit("\\")
                    self.pos += 1
                else:
                    buf.lit(nxt)
                    self.pos += 2
            elif c == "'":
                end = self.src.find("'", self.pos + 1)
                if end < 0:
                    raise ParseError("unterminated single quote")
                buf.lit(self.src[self.pos + 1 : end])
                self.pos = end + 1
            elif c == '"':
                self.pos += 1
                dynamic |= self._double_quoted(buf, subs, issues, terminator='"')
            elif c == "$":
                dynamic |= self._dollar(buf, subs, issues, in_double_quotes=False)
            elif c == "`":
                self._backticks(subs)
                buf.expansion()
                dynamic = True
            else:
                brace = _BRACE_RE.match(self.src, self.pos) if c == "{" and not buf.muted else None
                if brace is not None:
                    glob = True
                    buf.expansion()
                    buf.muted = True
                    brace_end = brace.end()
                    buf.lit(c)
                elif (c in "*?" and not in_class) or (c == "[" and not in_class and self._closes_bracket()):
                    glob = True
                    in_class = c == "["
                    buf.glob(c)
                elif c == "]" and in_class:
                    in_class = False
                    buf.glob(c)
                else:
                    buf.lit(c)
                self.pos += 1
        if self.pos == start:
            raise ParseError(f"unexpected {self.peek()!r}")
        value = None if dynamic else "".join(buf.text)
        pattern = "".join(buf.pattern) + ("]" if in_class else "")
        return Word(self.src[start : self.pos], value, glob, subs, issues, pattern)

    def _closes_bracket(self) -> bool:
        """A "[" is a glob only with a "]" later in the same word ("[" alone is the test command)."""
        i = self.pos + 1
        while i < len(self.src) and self.src[i] not in _WORD_BREAK:
            if self.src[i] == "]":
                return True
            i += 1
        return False

    def _double_quoted(
        self, buf: _Buf, subs: list[list[Tok]], issues: list[str], terminator: str | None
    ) -> bool:
        """Scan a "..." body (or an expanded here-document when terminator is None)."""
        dynamic = False
        escapable = "$`\"\\\n" if terminator else "$`\\\n"
        while True:
            if self.pos >= len(self.src):
                if terminator:
                    raise ParseError("unterminated double quote")
                return dynamic
            c = self.src[self.pos]
            if c == terminator:
                self.pos += 1
                return dynamic
            if c == "\\" and self.peek(1) and self.peek(1) in escapable:
                if self.peek(1) != "\n":
                    buf.lit(self.peek(1))
                self.pos += 2
            elif c == "$":
                dynamic |= self._dollar(buf, subs, issues, in_double_quotes=True)
            elif c == "`":
                self._backticks(subs)
                buf.expansion()
                dynamic = True
            else:
                buf.lit(c)
                self.pos += 1

    def _dollar(
        self, buf: _Buf, subs: list[list[Tok]], issues: list[str], *, in_double_quotes: bool
    ) -> bool:
        """Handle a ``$`` at self.pos; True when it starts an expansion."""
        nxt = self.peek(1)
        if nxt == "'" and not in_double_quotes:
            buf.lit(self._ansi_c())
            return False
        if nxt == '"' and not in_double_quotes:
            # $"..." (locale translation) behaves as "...".
            self.pos += 2
            return self._double_quoted(buf, subs, issues, terminator='"')
        if nxt in ("(", "{", "[") or (nxt and (nxt.isalnum() or nxt in "_@*#?$!-")):
            buf.expansion()
        if nxt == "[":
            # Old-style arithmetic $[ ... ]: the same evaluation as $(( ... )).
            close = self._bracket_end(self.pos + 2)
            if re.search(r"[A-Za-z_$`\[]", self.src[self.pos + 2 : close]):
                issues.append("arithmetic expansion $[...] on variables can run code")
            self.pos = close + 1
            return True
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
            m = NAME_RE.match(self.src, self.pos + 1)
            self.pos = m.end() if m and not nxt.isdigit() else self.pos + 2
            return True
        if nxt and nxt in "@*#?$!-":
            self.pos += 2
            return True
        buf.lit("$")
        self.pos += 1
        return False

    def _bracket_end(self, start: int) -> int:
        """Index of the "]" that closes ``$[``."""
        depth = 0
        for i in range(start, len(self.src)):
            c = self.src[i]
            if c == "[":
                depth += 1
            elif c == "]":
                if depth == 0:
                    return i
                depth -= 1
        raise ParseError("unterminated $[")

    def _arithmetic_end(self, start: int) -> int | None:
        """Index of the closing "))" of ``$((``, or None when it is ``$( (…) )`` instead."""
        depth = 0
        i = start
        while i < len(self.src):
            c = self.src[i]
            if c == "(":
                depth += 1
                if depth > MAX_NESTING:
                    raise ParseError("nested too deeply")
            elif c == ")":
                if depth == 0:
                    return i if self.src.startswith("))", i) else None
                depth -= 1
            i += 1
        raise ParseError("unterminated $((")

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
                    raise ParseError("unterminated quote in ${...}")
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
            raise ParseError("unterminated ${")
        content = self.src[self.pos + 2 : i]
        self.pos = i + 1
        m = _PARAM_RE.fullmatch(content)
        rest = (m.group("rest") or "") if m else ""
        if m is None or re.search(r"\$[({]|`|[<>]\(", rest):
            issues.append("parameter expansion that may assign, evaluate or run code")
        elif content.startswith("!") and not re.fullmatch(r"![A-Za-z_][A-Za-z0-9_]*(?:[@*]|\[[@*]\])", content):
            issues.append("indirect expansion ${!name} evaluates the subscript the variable may hold")

    def _backticks(self, subs: list[list[Tok]]) -> None:
        self.pos += 1
        inner: list[str] = []
        while True:
            if self.pos >= len(self.src):
                raise ParseError("unterminated backquote")
            c = self.src[self.pos]
            if c == "\\" and self.peek(1) in ("`", "\\", "$"):
                inner.append(self.peek(1))
                self.pos += 2
                continue
            self.pos += 1
            if c == "`":
                break
            inner.append(c)
        subs.append(Lexer("".join(inner), self.depth + 1).lex())

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
        raise ParseError("unterminated $'...'")
