"""grep: content search through the daemon's ``grep`` op (sandbox/search.py).

With ripgrep in the image, ripgrep walks the tree; otherwise the host walks it, applies the
same rules ripgrep would (.gitignore with git's semantics, hidden files, ``--glob``
overrides, file types) and the daemon's pure-Python engine searches that list. Both give the
same results.

Regex dialect: the syntax Python's ``re`` and ripgrep's Rust engine share — literals,
classes (``[a-z]``, ``\\d \\w \\s`` and their negations), ``.``, anchors ``^ $ \\b \\B``, groups
``(...)``, ``(?:...)``, ``(?P<name>...)``, inline flags ``(?imsx)``, alternation and the
quantifiers ``* + ? {m} {m,} {m,n}`` (also lazy). Not accepted (they differ between the
engines or exist in one only): lookaround, backreferences, ``\\A \\z \\Z``, ``\\p{..}``, POSIX
classes, class set operations, possessive quantifiers and unescaped literal braces.
"""

from __future__ import annotations

import posixpath
import re
import warnings
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from caisson.client.models import GrepResult
from caisson.policy import Level
from caisson.tools.base import ToolError, ToolInput, ToolResult, tool
from caisson.tools.search.listing import EXCLUDED_DIR, search_root, select_files, walk_with_rules
from caisson.tools.text import GitGlob, op_errors, shown_name

if TYPE_CHECKING:
    from caisson.tools.context import ToolContext

# Name globs of each file type (ripgrep's definitions, abridged).
FILE_TYPES: dict[str, tuple[str, ...]] = {
    "ada": ("*.adb", "*.ads"),
    "asm": ("*.asm", "*.s", "*.S"),
    "awk": ("*.awk",),
    "c": ("*.c", "*.h", "*.H"),
    "clojure": ("*.clj", "*.cljc", "*.cljs", "*.cljx", "*.edn"),
    "cmake": ("*.cmake", "CMakeLists.txt"),
    "cpp": ("*.C", "*.cc", "*.cpp", "*.cxx", "*.c++", "*.h", "*.hh", "*.hpp", "*.hxx", "*.h++", "*.inl"),
    "cs": ("*.cs",),
    "css": ("*.css", "*.scss", "*.sass", "*.less"),
    "csv": ("*.csv",),
    "dart": ("*.dart",),
    "docker": ("Dockerfile", "Dockerfile.*", "*.dockerfile"),
    "elixir": ("*.ex", "*.exs", "*.eex", "*.heex", "*.leex"),
    "elm": ("*.elm",),
    "erlang": ("*.erl", "*.hrl"),
    "fsharp": ("*.fs", "*.fsx", "*.fsi"),
    "go": ("*.go",),
    "graphql": ("*.graphql", "*.graphqls", "*.gql"),
    "groovy": ("*.groovy", "*.gradle"),
    "haskell": ("*.hs", "*.lhs"),
    "html": ("*.htm", "*.html", "*.ejs"),
    "java": ("*.java", "*.jsp"),
    "js": ("*.js", "*.jsx", "*.mjs", "*.cjs", "*.vue"),
    "json": ("*.json", "*.jsonl", "composer.lock"),
    "jsx": ("*.jsx",),
    "julia": ("*.jl",),
    "kotlin": ("*.kt", "*.kts"),
    "lua": ("*.lua",),
    "make": ("Makefile", "makefile", "GNUmakefile", "*.mk", "*.mak"),
    "markdown": ("*.md", "*.markdown", "*.mdx"),
    "nix": ("*.nix",),
    "ocaml": ("*.ml", "*.mli", "*.mll", "*.mly"),
    "perl": ("*.pl", "*.pm", "*.t", "*.pod"),
    "php": ("*.php", "*.php3", "*.php4", "*.php5", "*.phtml"),
    "proto": ("*.proto",),
    "ps": ("*.ps1", "*.psm1", "*.psd1"),
    "py": ("*.py", "*.pyi", "*.pyw"),
    "r": ("*.R", "*.r", "*.Rmd"),
    "rb": ("*.rb", "*.rake", "*.gemspec", "Gemfile", "Rakefile"),
    "rust": ("*.rs",),
    "scala": ("*.scala", "*.sc", "*.sbt"),
    "sh": ("*.sh", "*.bash", "*.zsh", "*.ksh", ".bashrc", ".bash_profile", ".zshrc", ".profile"),
    "sql": ("*.sql", "*.psql"),
    "svelte": ("*.svelte",),
    "swift": ("*.swift",),
    "tex": ("*.tex", "*.ltx", "*.sty", "*.cls", "*.bib"),
    "tf": ("*.tf", "*.tfvars"),
    "toml": ("*.toml", "Cargo.lock"),
    "ts": ("*.ts", "*.tsx", "*.mts", "*.cts"),
    "tsx": ("*.tsx",),
    "txt": ("*.txt",),
    "vue": ("*.vue",),
    "xml": ("*.xml", "*.xsd", "*.xsl", "*.xslt", "*.svg"),
    "yaml": ("*.yaml", "*.yml"),
    "zig": ("*.zig",),
}
TYPE_ALIASES = {
    "javascript": "js",
    "typescript": "ts",
    "python": "py",
    "rs": "rust",
    "ruby": "rb",
    "golang": "go",
    "c++": "cpp",
    "csharp": "cs",
    "md": "markdown",
    "yml": "yaml",
    "kt": "kotlin",
    "bash": "sh",
    "shell": "sh",
    "hs": "haskell",
    "ex": "elixir",
    "pl": "perl",
    "dockerfile": "docker",
    "makefile": "make",
    "terraform": "tf",
    "text": "txt",
}
DEFAULT_TIMEOUT = 60.0
_ESCAPES = set("dDwWsSbBntrfv")
# What ripgrep's regex syntax lets a backslash escape besides letters.
_META = set("\\.+*?()|[]{}^$#&-~")
_REPEAT = re.compile(r"\{\d+(,\d*)?\}")
_GROUP = re.compile(r"\(\?(?:[imsx]*(?:-[imsx]+)?[:)]|P<\w+>)")


def check_pattern(pattern: str, *, literal: bool, multiline: bool) -> str:
    """The pattern both engines will run, or an ``invalid_pattern`` error for what they would
    treat differently (see the module docstring). A backslash before punctuation that is not
    a regex metacharacter (``\\/``, ``\\:``) is dropped: ripgrep refuses such escapes."""
    if not multiline and ("\n" in pattern or (not literal and "\\n" in pattern)):
        raise ToolError("invalid_pattern", "The pattern matches a newline; set multiline to search across lines")
    if literal:
        return pattern

    def bad(why: str) -> ToolError:
        return ToolError("invalid_pattern", f"Invalid regex pattern: {why}")

    out: list[str] = []
    i, n = 0, len(pattern)
    in_class = quantified = False
    while i < n:
        c = pattern[i]
        if c == "\\":
            if i + 1 >= n:
                raise bad("it ends with a backslash")
            e = pattern[i + 1]
            if e == "x":
                if not re.fullmatch(r"[0-9A-Fa-f]{2}", pattern[i + 2 : i + 4]):
                    raise bad("write \\x with exactly two hex digits")
                out.append(pattern[i : i + 4])
                i += 4
            elif e.isalnum() and e not in _ESCAPES:
                raise bad(f"\\{e} is not supported (the dialect is the one Python re and ripgrep share)")
            elif e.isalnum() or e in _META:
                out.append(pattern[i : i + 2])
                i += 2
            else:
                out.append("[ ]" if e == " " and not in_class else e)
                i += 2
            quantified = False
            continue
        if in_class:
            if c == "]":
                in_class = False
            elif c == "[" or pattern.startswith(("&&", "--", "~~", "||"), i):
                raise bad("nested classes, POSIX classes and class set operations are not supported")
            out.append(c)
            i += 1
            continue
        if c == "[":
            in_class = True
            j = i + 1
            if pattern.startswith("^", j):
                j += 1
            if pattern.startswith("]", j):
                j += 1
            out.append(pattern[i:j])
            i = j
            quantified = False
            continue
        if c == "(" and pattern.startswith("(?", i) and not _GROUP.match(pattern, i):
            raise bad("lookaround, backreferences and this group syntax are not supported")
        if c == "{":
            m = _REPEAT.match(pattern, i)
            if m is None:
                raise bad("escape a literal '{' as '\\{'")
            out.append(m.group())
            i = m.end()
            quantified = True
            continue
        if c == "+" and quantified:
            raise bad("possessive quantifiers are not supported")
        quantified = c in "*+" or (c == "?" and not quantified)
        out.append(c)
        i += 1
    normalized = "".join(out)
    flags = re.MULTILINE | (re.DOTALL if multiline else 0)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            re.compile(normalized, flags)
    except re.error as exc:
        raise bad(str(exc)) from None
    return normalized


def type_globs(name: str | None) -> tuple[str, ...]:
    if name is None:
        return ()
    key = TYPE_ALIASES.get(name.lower(), name.lower())
    if key not in FILE_TYPES:
        known = ", ".join(sorted(FILE_TYPES))
        raise ToolError("invalid_arguments", f"Unknown file type '{name}'. Known types: {known}")
    return FILE_TYPES[key]


class GrepInput(ToolInput):
    pattern: str = Field(description="Regular expression (or a literal string with literal=true)")
    path: str | None = Field(None, description="File or directory to search (default: the working directory)")
    glob: str | None = Field(None, description="Only files matching this glob, e.g. '*.js' or 'src/**/*.{ts,tsx}'")
    file_type: str | None = Field(None, alias="type", description="Only files of this type, e.g. py, js, rust, go")
    output_mode: Literal["files_with_matches", "content", "count"] = Field(
        "files_with_matches", description="Matching files, matching lines, or match counts per file"
    )
    ignore_case: bool = Field(False, description="Case-insensitive search")
    literal: bool = Field(False, description="Treat pattern as a literal string")
    multiline: bool = Field(False, description="Let matches span lines ('.' also matches newlines)")
    context_before: int = Field(0, ge=0, le=100, description="Lines of context before each match (content mode)")
    context_after: int = Field(0, ge=0, le=100, description="Lines of context after each match (content mode)")
    context: int | None = Field(None, ge=0, le=100, description="Lines of context before and after; overrides both")
    line_numbers: bool = Field(True, description="Show line numbers (content mode)")
    include_hidden: bool = Field(False, description="Search hidden files and directories too")
    no_ignore: bool = Field(False, description="Search files that .gitignore excludes too")
    limit: int = Field(1000, ge=1, le=100_000, description="Most matches (content) or files shown")
    max_per_file: int | None = Field(None, ge=1, description="Most matches shown per file (content mode)")
    max_line_chars: int = Field(2000, ge=10, le=100_000, description="Longer lines are cut and end in '...'")
    timeout: float = Field(DEFAULT_TIMEOUT, gt=0, le=600, description="Seconds before the search stops")


async def run_search(
    ctx: ToolContext, args: GrepInput, engine: Literal["auto", "rg", "python"] = "auto"
) -> tuple[str, GrepResult]:
    """Search as ``args`` says with the chosen engine: the directory the reply's paths are
    relative to, and the daemon's reply."""
    pattern = check_pattern(args.pattern, literal=args.literal, multiline=args.multiline)
    types = type_globs(args.file_type)
    target, kind = await search_root(ctx, args.path)
    root = target if kind == "dir" else posixpath.dirname(target)
    if ctx.client.info is None:
        await ctx.client.ping()
    assert ctx.client.info is not None
    if engine == "auto":
        engine = "rg" if ctx.client.info.rg else "python"
    before = args.context if args.context is not None else args.context_before
    after = args.context if args.context is not None else args.context_after
    mode: Literal["content", "files", "count"] = (
        "files" if args.output_mode == "files_with_matches" else args.output_mode
    )
    globs = ([args.glob] if args.glob else []) + [EXCLUDED_DIR]
    paths = None
    if kind == "file":
        paths = [posixpath.basename(target)]
    elif engine == "python":
        paths = await _python_file_list(ctx, root, args, [GitGlob(g) for g in globs], [GitGlob(t) for t in types])
    with op_errors(root):
        reply = await ctx.client.grep(
            root, pattern, paths=paths, engine=engine, mode=mode, fixed_strings=args.literal,
            ignore_case=args.ignore_case, multiline=args.multiline, globs=globs, type_globs=types,
            hidden=args.include_hidden, no_ignore=args.no_ignore, max_total=args.limit,
            max_per_file=args.max_per_file, max_line_chars=args.max_line_chars,
            before=before if mode == "content" else 0, after=after if mode == "content" else 0, timeout=args.timeout,
        )
    # The policy checked the search root; every file the search read is checked here, so a
    # recursive search (or include_hidden) never shows what a read of that file would not.
    return root, reply.without(root, ctx.is_secret)


async def _python_file_list(
    ctx: ToolContext, root: str, args: GrepInput, overrides: list[GitGlob], types: list[GitGlob]
) -> list[str]:
    # A --glob or type whitelist can select hidden files: the walk has to show them.
    hidden = args.include_hidden or bool(types) or any(not g.negated for g in overrides)
    walk, rules = await walk_with_rules(ctx, root, hidden, not args.no_ignore)
    return [entry.path for entry in select_files(walk, rules, overrides, types, args.include_hidden)]


def _format_content(prefix: str, reply: GrepResult, line_numbers: bool, with_context: bool) -> list[str]:
    out: list[str] = []
    for file in reply.files:
        path = shown_name(prefix + file.path)
        rows: dict[int, tuple[str, str]] = {}
        for hit in file.matches:
            for n, text in hit.before + hit.after:
                rows.setdefault(n, ("-", text))
            for k, text in enumerate(hit.lines):
                rows[hit.line + k] = (":", text)
        previous = None
        for n in sorted(rows):
            sep, text = rows[n]
            if with_context and previous is not None and n > previous + 1:
                out.append("--")
            out.append(f"{path}{sep}{n}{sep} {text}" if line_numbers else f"{path}{sep} {text}")
            previous = n
    return out


@tool(
    "grep",
    GrepInput,
    level=Level.SAFE,
    access="read",
    snippet="Search file contents by regex or literal (files, matching lines with context, or counts)",
    paths=lambda a: [a.path or "."],
)
async def grep(ctx: ToolContext, args: GrepInput) -> ToolResult:
    base, reply = await run_search(ctx, args)
    prefix = base.rstrip("/") + "/"
    matches = [
        {
            "path": prefix + f.path,
            "line": h.line,
            "column": h.column,
            "text": "\n".join(h.lines),
            "context_before": [list(x) for x in h.before],
            "context_after": [list(x) for x in h.after],
        }
        for f in reply.files
        for h in f.matches
    ]
    data: dict[str, Any] = {
        "engine": reply.engine,
        "mode": args.output_mode,
        "truncated": reply.truncated,
        "timed_out": reply.timed_out,
    }
    if args.output_mode == "files_with_matches":
        data["files"] = [prefix + path for path in reply.paths]
        lines = [shown_name(path) for path in data["files"]]
        unit = "files"
    elif args.output_mode == "count":
        counted = list(zip(reply.paths, reply.counts, strict=True))
        lines = [f"{shown_name(prefix + path)}:{count}" for path, count in counted]
        data["counts"] = [{"path": prefix + path, "count": count} for path, count in counted]
        unit = "files"
    else:
        with_context = bool(args.context or args.context_before or args.context_after)
        lines = _format_content(prefix, reply, args.line_numbers, with_context)
        data["matches"] = matches
        unit = "matches"
    shown = len(matches) if args.output_mode == "content" else len(reply.paths)
    data["shown"] = shown
    text = "\n".join(lines) if lines else "No matches found"
    notes = []
    if reply.truncated:
        notes.append(f"(Results truncated: {shown} {unit} shown. Narrow the search or raise the limit.)")
    if reply.timed_out:
        notes.append(f"(The search timed out after {args.timeout:g} s; results are partial.)")
    if notes:
        text += "\n\n" + "\n".join(notes)
    truncated = reply.truncated or reply.timed_out
    return ToolResult.success(
        text,
        data,
        truncated=truncated,
        truncation={"shown": shown, "unit": unit, "timed_out": reply.timed_out} if truncated else None,
    )
