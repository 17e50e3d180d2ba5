"""How a parsed command line gets its level.

Walks the simple commands in order: substitutions first, then redirections, assignments,
``[[ ]]`` conditions and the command itself, whose rule comes from :mod:`.commands`. Keeps the
possible working directories, checks the paths commands read and write, and collects
segments, the residual level and reasons.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ..levels import Level
from ..paths import is_home_entry, normalize
from .destructive import BLOCK_DEVICE_RE, backstop
from .lexer import ASSIGN_RE, MAX_DEPTH, Lexer, ParseError, Redir, Tok, Word
from .parser import Simple, parse
from .places import Places
from .programs import DOWNLOADERS, INTERPRETERS, STD_BIN_DIRS, VERSION_PROBES
from .result import BashSegment
from .variables import evaluates_subscript, sensitive_var

_S, _C, _D = Level.SAFE, Level.CAUTIOUS, Level.DANGEROUS
# No real command line has this many commands; past it, analysis stops (dangerous).
MAX_COMMANDS = 1000
MAX_WRAPPED = 64
DEV_SINKS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/zero", "/dev/tty", "/dev/fd/1", "/dev/fd/2"})


@dataclass
class Seg:
    text: str
    level: Level = _S

    def add(self, level: Level) -> None:
        if level > self.level:
            self.level = level


class Analyzer:
    def __init__(
        self,
        handlers: Mapping[str, Handler],
        roots: Sequence[str],
        secret_patterns: Sequence[str],
        secret_exceptions: Sequence[str],
        protected: Sequence[str],
        cwd: str | None,
    ) -> None:
        # Scripts within scripts (eval, bash -c) and commands within commands (timeout,
        # xargs, find -exec) being analysed: both are bounded.
        self.depth = 0
        self.wrapped = 0
        # Per-command rules (commands/), given by the classifier so this module need not import them.
        self.handlers = handlers
        self.places = Places(roots, secret_patterns, secret_exceptions, protected, cwd)
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

    def note(self, seg: Seg, level: Level, why: str) -> None:
        seg.add(level)
        self.reason(why)

    def level(self) -> Level:
        return max([self.residual, *(s.level for s in self.segments)])

    # ----------------------------------------------------------------- paths

    def inside(self, path: str) -> bool:
        return self.places.inside(path)

    def chdir(self, path: str | None) -> None:
        self.places.chdir(path)

    def _note(self, seg: Seg | None, level: Level, why: str) -> None:
        if seg is None:
            self.effect(level, why)
        else:
            self.note(seg, level, why)

    def write(self, seg: Seg | None, word: Word, what: str) -> None:
        """A write to ``word``; ``seg`` None means it is a redirection (residual)."""
        if word.value is None:
            self._note(seg, _D, f"{what} a path computed at run time")
            return
        path = word.value
        if path in DEV_SINKS:
            return
        if path.startswith(("/dev/tcp/", "/dev/udp/")):
            self._note(seg, _D, f"{what} a network socket")
            return
        if BLOCK_DEVICE_RE.match(path):
            self.flag_destructive("raw-device-write", f"{what} a block device")
            self._note(seg, _D, f"{what} a block device")
            return
        if word.glob and re.search(r"(^|/)\.[*?\[]", path):
            self._note(seg, _D, f"{what} a glob that may match '..'")
            return
        if not self.inside(path):
            self._note(seg, _D, f"{what} {path} outside the workspace")
            return
        hit = self.places.protected_path(word)
        if hit is not None and is_home_entry(hit):
            self._note(seg, _D, f"{what} {hit}, the home or an entry at its top (the kernel lets cautious commands write only "
                       "beneath the home's existing entries; a new one there needs approval)")
            return
        if hit is not None:
            self._note(seg, _D, f"{what} {hit}, which programs read at start and may run code from (a protected path)")
            return
        self._note(seg, _C, f"{what} the workspace")

    def read(self, seg: Seg | None, word: Word, *, reveals: bool = True) -> None:
        """A read of ``word``. ``reveals`` False: only some of the content comes out (a search
        for an ordinary pattern), so a file that only may be a secret is cautious."""
        path = word.value
        if path is not None and path.startswith(("/dev/tcp/", "/dev/udp/")):
            self._note(seg, _D, "reads from a network socket")
            return
        if path is None and seg is None:
            self.effect(_D, "reads from a path computed at run time")
            return
        hit = self.places.secret(word)
        if hit is None:
            return
        name, certain = hit
        if certain:
            self._note(seg, _D, f"reads the secret file {name}")
        elif reveals:
            self._note(seg, _D, f"reads {word.text}, which may name a secret file ({name})")
        else:
            self._note(seg, _C, f"searches {word.text}, which may name a secret file ({name})")

    # ----------------------------------------------------------------- walking

    def run_tokens(self, tokens: list[Tok]) -> None:
        stages: dict[int, list[tuple[int, list[str]]]] = {}
        for simple in parse(tokens):
            start = len(self.ran)
            self.simple(simple)
            stages.setdefault(simple.pipeline, []).append((simple.stage, self.ran[start:]))
        for pipeline in stages.values():
            downloaded = False
            for _, names in sorted(pipeline, key=lambda item: item[0]):
                if downloaded and any(n in INTERPRETERS for n in names):
                    self.flag_destructive("download-piped-to-shell", "the output of a download is run by a shell or interpreter")
                downloaded |= any(n in DOWNLOADERS for n in names)

    def nested(self, item: Word | Redir) -> None:
        """Analyse the substitutions inside a word or here-document (they run first)."""
        for sub in item.subs:
            self.run_tokens(sub)
        for issue in item.issues:
            self.effect(_D, issue)

    def simple(self, s: Simple) -> None:
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
            if sensitive_var(var):
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
        if any(n in DOWNLOADERS for n in substituted) and any(n in INTERPRETERS for n in self.ran[mid:]):
            self.flag_destructive("download-piped-to-shell", "a shell or interpreter runs the output of a download")

    def assignment(self, word: Word) -> None:
        m = ASSIGN_RE.match(word.raw)
        assert m is not None
        name = m.group(1)
        if m.group(2):
            self.effect(_D, f"array element assignment {name}[…] evaluates its subscript")
        elif sensitive_var(name):
            self.effect(_D, f"sets {name}, which changes what later commands run")

    def redirection(self, r: Redir) -> None:
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

    def condition(self, words: list[Word]) -> None:
        if evaluates_subscript(words):
            self.effect(_D, "[[ -v: the array subscript is evaluated, which can run code")
        for i, w in enumerate(words):
            if w.value in ("-eq", "-ne", "-lt", "-le", "-gt", "-ge"):
                operands = words[i - 1 : i] + words[i + 1 : i + 2]
                if any(not _numeric_operand(o) for o in operands):
                    self.effect(_D, "[[ arithmetic comparison evaluates variables, which can run code")

    def analyze_text(self, text: str) -> None:
        """A script a command runs (``eval``, ``bash -c``): analysed one level deeper; what
        cannot be parsed (too deep included) is dangerous."""
        self.depth += 1
        try:
            self.run_tokens(Lexer(text, self.depth).lex())
        except ParseError as exc:
            self.effect(_D, f"unparseable script ({exc})")
            hit = backstop(text)
            if hit:
                self.flag_destructive(hit, "matched in text that could not be parsed")
        finally:
            self.depth -= 1

    def command(self, words: list[Word]) -> None:
        """Classify one command (argv) as a segment of its own."""
        if len(self.segments) >= MAX_COMMANDS:
            raise ParseError(f"more than {MAX_COMMANDS} commands")
        if self.depth > MAX_DEPTH or self.wrapped > MAX_WRAPPED:
            raise ParseError("commands nested too deeply")
        seg = Seg(" ".join(w.text for w in words))
        self.segments.append(BashSegment(text=seg.text, level=_S))
        index = len(self.segments) - 1
        self.wrapped += 1
        try:
            name = self._dispatch(seg, words)
        finally:
            self.wrapped -= 1
        self.segments[index] = BashSegment(text=seg.text, level=seg.level)
        if name is not None:
            self.ran.append(name)

    def _dispatch(self, seg: Seg, words: list[Word]) -> str | None:
        head = words[0]
        if not head.static:
            self.note(seg, _D, "the command name is computed at run time")
            return None
        name = head.value or ""
        if "/" in name:
            directory, base = posixpath.split(name)
            if normalize(directory) not in STD_BIN_DIRS:
                self.note(seg, _D, f"runs the program {name}")
                return None
            name = base
        args = words[1:]
        if name.startswith("mkfs") or name in ("mke2fs", "mkswap", "wipefs"):
            self.flag_destructive("mkfs", f"{name} formats a filesystem")
        probe = [w.value for w in args]
        if name in VERSION_PROBES and (
            probe == ["--version"] or (probe == ["-V"] and name.startswith("python")) or (probe == ["version"] and name == "go")
        ):
            self.note(seg, _S, f"{name}: version query")
            return name
        handler = self.handlers.get(name)
        if handler is None:
            self.note(seg, _D, f"{name}: not a known read-only or workspace-only command")
            return name
        handler(self, seg, name, args)
        return name


# A per-command rule: judges one simple command (its name and argument words) for the analyzer.
Handler = Callable[["Analyzer", Seg, str, list[Word]], None]


def _numeric_operand(word: Word) -> bool:
    if word.value is not None:
        return re.fullmatch(r"-?\d+", word.value) is not None
    return re.fullmatch(r'"?\$[?#$!]"?', word.raw) is not None
