"""The ``grep`` op: content search with ripgrep when the image has it, else pure Python.

Both engines give the same results for the same query:

* ripgrep walks ``root`` itself (.gitignore, hidden files, ``--glob`` overrides); the Python
  engine searches the explicit file list the host computed with the same rules and sent in
  the blob (relative paths, NUL-separated). A list sent to ripgrep is searched as given.
* The regex dialect is the subset both engines share; the host checks it before sending.
* A file with a NUL byte anywhere is binary and skipped. Lines end at ``\\n``; ``\\r\\n`` counts
  as one terminator. Columns are 1-based characters. Invalid UTF-8 is shown as U+FFFD.
* Multiline mode: ``.`` matches newlines, and matches on touching lines form one result.
* Results are sorted by path, then line; ``max_per_file`` and ``max_total`` cap them.

The arguments of ``grep`` and ``find`` are declared in ``opspec`` (with ``roots`` an explicit
file list is searched by the Python engine). The result: ``engine``, ``truncated``,
``timed_out``, and by mode:

* content: ``files`` [{``path``, ``count``, ``truncated``, ``nlink``, ``matches``: [{``line``,
  ``end_line``, ``column``, ``lines``, ``before``, ``after``}]}];
* files and count: ``paths`` (sorted), ``linked`` (those of them with more than one name),
  and for count ``counts`` (the matches in each of ``paths``). Flat lists: a search lists
  thousands of files, and a record per file costs both ends more than the search's own work.
"""

import base64
import bisect
import fnmatch
import json
import operator
import os
import re
import shutil
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Tuple, TypeVar

from . import cancel
from .errors import DaemonError, Reply
from .fsaccess import fs_access, request_user
from .fscommon import abspath
from .pathres import Resolver
from .process import Proc
from .proctable import table
from .spawn import DEFAULT_PATH, Spec
from .streams import Stream
from .users import UserInfo, resolve_user

# ripgrep output kept; past it the search counts as truncated.
MAX_RG_OUTPUT = 128 * 1024 * 1024
# Text put into one reply; past it further matches are dropped (truncated).
MAX_REPLY_TEXT = 16 * 1024 * 1024
# Files up to this size are read whole by the Python engine; larger ones are streamed.
WHOLE_READ = 32 * 1024 * 1024
_READ = 1024 * 1024
# Flags that make ripgrep honour exactly the rules the host applies for the Python engine.
_RG_BASE = [
    "--no-config",
    "--no-require-git",
    "--no-ignore-dot",
    "--no-ignore-exclude",
    "--no-ignore-global",
    "--no-messages",
    "--encoding",
    "none",
]

_BEGIN = b'{"type":"begin","data":{"path":{"text":"'

# One match: (first line, last line, column, lines of text).
Hit = Tuple[int, int, int, List[str]]


_T = TypeVar("_T")

# An exclusion of one hidden name ("!.git"): ripgrep would match every path it walks against
# it, yet meets such an entry only where an ignore file's "!" rule re-includes it.
_HIDDEN_NAME = re.compile(r"!(\.[^/*?\[\]{}\\!]+)")


class _Walk:
    """Which files ripgrep's walk takes: ``hidden``, ``no_ignore``, ``globs``, ``type_globs``."""

    def __init__(self, args: Dict[str, Any]) -> None:
        self.hidden = args["hidden"]
        self.type_globs = _strings(args, "type_globs")
        globs = _strings(args, "globs")
        self.argv = (["--hidden"] if self.hidden else []) + (["--no-ignore"] if args["no_ignore"] else [])
        # Names dropped from the results here rather than by ripgrep (see _HIDDEN_NAME): only
        # while no glob and no option lets hidden entries in.
        self.pruned: List[str] = []
        lets_in = self.hidden or any(not glob.startswith("!") for glob in globs)
        for glob in globs:
            hidden_name = None if lets_in else _HIDDEN_NAME.fullmatch(glob)
            if hidden_name:
                self.pruned.append(hidden_name.group(1))
            else:
                self.argv += ["-g", glob]
        if self.type_globs:
            for glob in self.type_globs:
                self.argv += ["--type-add", "caisson:" + glob]
            self.argv += ["-t", "caisson"]

    def kept(self, paths: List[str]) -> List[str]:
        """``paths`` less those at or below an entry with a pruned name."""
        for name in self.pruned:
            paths = [p for p in paths if name not in p or name not in p.split("/")]
        return paths

    def selected(self, found: Dict[str, _T]) -> Dict[str, _T]:
        """The results of ripgrep's search these rules keep."""
        if not self.pruned and not self.type_globs:
            return found
        paths = self.kept(list(found))
        if self.type_globs:
            # A --glob match overrides ripgrep's type filter: apply the type to every result.
            paths = [p for p in paths if _is_type(p, self.type_globs)]
        return {p: found[p] for p in paths}


class _Query:
    def __init__(self, args: Dict[str, Any]) -> None:
        self.root = abspath(args, "root").rstrip("/") or "/"
        self.root_fd = -1  # the root, opened as the request allows (see open_root)
        self.res: Optional[Resolver] = None
        self.user: Optional[UserInfo] = request_user(args)
        self.pattern = args["pattern"]
        self.engine = args["engine"]
        self.mode = args["mode"]
        self.fixed = args["fixed_strings"]
        self.ignore_case = args["ignore_case"]
        self.multiline = args["multiline"]
        self.walk = _Walk(args)
        self.max_total = max(1, args["max_total"])
        self.per_file = min(args["max_per_file"] or self.max_total, self.max_total)
        self.max_line_chars = max(1, args["max_line_chars"])
        self.before = args["before"]
        self.after = args["after"]
        self.timeout = args["timeout"]
        flags = re.MULTILINE | (re.IGNORECASE if self.ignore_case else 0) | (re.DOTALL if self.multiline else 0)
        try:
            self.regex = re.compile(re.escape(self.pattern) if self.fixed else self.pattern, flags)
        except re.error as exc:
            raise DaemonError("bad_request", "invalid regular expression: %s" % exc) from None


def _open_root(res: Resolver, root: str) -> int:
    try:
        return res.open(root, os.O_RDONLY | os.O_DIRECTORY)
    except NotADirectoryError:
        raise DaemonError("not_a_directory", "not a directory: %s" % root) from None


def _open_file(q: _Query, rel: str) -> int:
    """A file below the root, for reading: beneath the roots when the request has them,
    else relative to the root's descriptor (the kernel follows links, with the request's credentials)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC
    if q.res is not None and q.res.roots is not None:
        return q.res.open(q.root.rstrip("/") + "/" + rel, flags)
    return os.open(rel, flags, dir_fd=q.root_fd)


def _strings(args: Dict[str, Any], name: str) -> List[str]:
    values = args[name]
    if not all(isinstance(v, str) and v and "\0" not in v for v in values):
        raise DaemonError("bad_request", "%s must be a list of non-empty strings" % name)
    return values  # type: ignore[no-any-return]


class _FileHits:
    __slots__ = ("count", "hits", "raw")

    def __init__(self) -> None:
        self.count = 0  # matches found (content: at most per_file + 1)
        self.hits: List[Hit] = []
        self.raw: List[bytes] = []  # ripgrep's JSON match records, decoded only when shown

    def take(self, n: int) -> List[Hit]:
        if self.raw:
            return [_rg_hit(json.loads(record)["data"]) for record in self.raw[:n]]
        return self.hits[:n]


def _has_nul(q: _Query, rel: str) -> bool:
    """True when the file holds a NUL byte (or cannot be read: it is skipped either way)."""
    try:
        with os.fdopen(_open_file(q, rel), "rb") as handle:
            while True:
                chunk = handle.read(_READ)
                if not chunk:
                    return False
                if b"\0" in chunk:
                    return True
    except (OSError, DaemonError):  # unreadable, or outside the roots
        return True


def _strip_cr(line: str) -> str:
    return line[:-1] if line.endswith("\r") else line


def _line_text(raw: str) -> List[str]:
    lines = raw.split("\n")
    if len(lines) > 1 and lines[-1] == "":
        lines.pop()
    return [_strip_cr(line) for line in lines]


# ---------------------------------------------------------------- ripgrep


def _run_rg(
    q: _Query, rg: str, paths: Optional[List[str]], each: Optional[Callable[[bytes], None]] = None
) -> Tuple[bytes, bool, bool]:
    """Run ripgrep in ``root``; its stdout, whether it timed out, whether output was cut
    (``each``: handed whole lines of it while ripgrep runs, as ``_spawn`` does)."""
    if paths is not None:
        # ripgrep searches a file it is given by name even when it holds a NUL byte.
        paths = [p for p in paths if not _has_nul(q, p)]
        if not paths:
            return b"", False, False
    argv = [rg] + _RG_BASE + ["--with-filename"] + (["-i"] if q.ignore_case else ["-s"])
    if q.fixed:
        argv.append("-F")
    # Line mode: "$" matches before "\r\n" too. Multiline: "\r" is an ordinary character.
    argv += ["-U", "--multiline-dotall"] if q.multiline else ["--crlf"]
    argv += q.walk.argv
    if q.mode == "content":
        # JSON records: one per line whatever a name holds (a name may hold a line break, and
        # the text records' binary-file note carries no NUL), and they tell which lines form
        # one match in multiline mode.
        argv.append("--json")
        if not q.multiline:
            argv += ["-m", str(q.per_file + 1)]
    else:
        # Also for "files": unlike -l, --count reads each file to the end, so ripgrep itself
        # drops every file with a NUL byte.
        argv += ["--count", "--null"]
    argv += ["-e", q.pattern, "--"] + (paths if paths is not None else ["."])
    return _spawn(argv, q.root_fd, q.user, q.timeout, b"\n", each)


def _spawn(
    argv: List[str],
    root_fd: int,
    user: Optional[UserInfo],
    timeout: Optional[float],
    sep: bytes,
    each: Optional[Callable[[bytes], None]] = None,
) -> Tuple[bytes, bool, bool]:
    """Run ripgrep in the root's descriptor as the request's user (else the daemon's own: the
    one the Python engine reads files as); its output (cut after the last whole
    ``sep``-terminated record), timed out, output cut. ``each`` is handed the whole records
    as they arrive, so that its work overlaps ripgrep's walk (which leaves a core free)."""
    user = user or resolve_user(os.geteuid())
    env = {"PATH": os.environ.get("PATH", DEFAULT_PATH), "HOME": user.home}
    # The child changes into the directory this descriptor holds, not into a name.
    spec = Spec(argv, None, "rg (search)", "/proc/self/fd/%d" % root_fd, env, user, cwd_fd=root_fd)
    proc = Proc(spec, Stream(MAX_RG_OUTPUT, ring=False), Stream(64 * 1024, ring=False))
    table().start(proc, stdin_pipe=False, timeout=timeout)
    cancel.track(proc)
    handed = 0  # bytes of the output given to ``each`` (the buffer only grows: ring=False)
    while True:
        with proc.cond:
            while not proc.finished and (each is None or proc.out.buf.find(sep, handed) < 0):
                proc.cond.wait()
            finished = proc.finished
            end = proc.out.buf.rfind(sep, handed) + 1 if each is not None else 0
            records = bytes(proc.out.buf[handed:end]) if end > handed else b""
        if records and each is not None:
            each(records)
            handed = end
        if finished:
            break
    out = bytes(proc.out.buf)
    if proc.exit_code == 2 and not out:
        message = bytes(proc.err.buf).decode("utf-8", "replace").strip()
        raise DaemonError("bad_request", "ripgrep: %s" % (message or "error"))
    cut = proc.out.total > len(proc.out.buf)
    if cut:
        out = out[: out.rfind(sep) + 1]
    return out, proc.timed_out, cut


# ripgrep's --count --null record ("\r\n" ends it under --crlf), without the "./" of a path below ".".
_COUNT_RECORD = re.compile(r"(?:\./)?([^\0]*)\0(\d+)\r?\n")


def _relative(path: str) -> str:
    """A path as ripgrep prints it below ``.``, without the ``./``."""
    return path[2:] if path.startswith("./") else path


def _rg_path(data: Dict[str, Any]) -> str:
    path = data.get("text")
    if path is None:
        path = base64.b64decode(data.get("bytes", "")).decode("utf-8", "surrogateescape")
    return _relative(path)


def _rg_hit(data: Dict[str, Any]) -> Hit:
    lines = data["lines"]
    raw = lines["text"].encode("utf-8") if "text" in lines else base64.b64decode(lines["bytes"])
    subs = data.get("submatches") or [{"start": 0}]
    column = len(raw[: subs[0]["start"]].decode("utf-8", "replace")) + 1
    text = _line_text(raw.decode("utf-8", "replace"))
    first = data["line_number"]
    return first, first + len(text) - 1, column, text


def _is_type(path: str, globs: List[str]) -> bool:
    name = path.rsplit("/", 1)[-1]
    return any(fnmatch.fnmatchcase(name, glob) for glob in globs)


def _rg_counts(q: _Query, rg: str, paths: Optional[List[str]]) -> Tuple[Dict[str, int], bool, bool]:
    """Files and count modes: the matches in each file that has some."""
    out, timed_out, cut = _run_rg(q, rg, paths)
    # Thousands of records in one pass (a name may hold a line break, never NUL).
    counts = {name: int(count) for name, count in _COUNT_RECORD.findall(out.decode("utf-8", "surrogateescape"))}
    return counts, timed_out, cut


def _rg_engine(q: _Query, rg: str, paths: Optional[List[str]]) -> Tuple[Dict[str, _FileHits], bool, bool]:
    """Content mode: the hits of each file that has some."""
    records = _JsonRecords(q)
    _, timed_out, cut = _run_rg(q, rg, paths, records.feed)
    return records.finish(), timed_out, cut


def _keep(q: _Query, found: Dict[str, _FileHits], path: str, hits: _FileHits, binary: bool, capped: bool) -> None:
    if not binary and capped and hits.count > q.per_file:
        binary = _has_nul(q, path)  # ripgrep stopped early (-m), before any NUL
    if not binary and hits.count:
        found[path] = hits


class _JsonRecords:
    """Content mode's JSON records, taken in batches of whole lines while ripgrep still runs
    (a file's records come together, between its "begin" and "end"). Match records are kept
    raw and decoded only if they make it into the result."""

    def __init__(self, q: _Query) -> None:
        self.q = q
        self.found: Dict[str, _FileHits] = {}
        self.current: Optional[_FileHits] = None
        self.path = ""

    def feed(self, lines: bytes) -> None:
        q = self.q
        for record in lines.split(b"\n"):
            current = self.current
            if record.startswith(b'{"type":"match"'):
                if current is not None:
                    current.count += 1
                    if current.count <= q.per_file + 1:
                        current.raw.append(record)
            elif record.startswith(b'{"type":"begin"'):
                self.current = _FileHits()
                # Most paths need no JSON unescaping: slice them out instead of parsing the record.
                if record.startswith(_BEGIN) and record.endswith(b'"}}}') and b"\\" not in record:
                    self.path = _relative(record[len(_BEGIN) : -4].decode("utf-8"))
                else:
                    self.path = _rg_path(json.loads(record)["data"]["path"])
            elif record.startswith(b'{"type":"end"') and current is not None:
                # Line mode stops a file at per_file + 1 matches (-m), maybe before a NUL byte.
                _keep(q, self.found, self.path, current, b'"binary_offset":null' not in record, not q.multiline)
                self.current = None

    def finish(self) -> Dict[str, _FileHits]:
        return self.found


# ---------------------------------------------------------------- pure Python


def _scan_lines(q: _Query, lines: List[str], want: int) -> Tuple[int, List[Hit]]:
    """Matching lines (up to ``want`` when > 0): their count and, for content, the hits."""
    count = 0
    hits: List[Hit] = []
    search = q.regex.search
    for number, line in enumerate(lines, 1):
        found = search(line)
        if found is None:
            continue
        count += 1
        if q.mode == "content":
            hits.append((number, number, len(line[: found.start()]) + 1, [line]))
        if want and count >= want:
            break
    return count, hits


def _scan_multiline(q: _Query, text: str, want: int) -> Tuple[int, List[Hit]]:
    """Matches across lines; matches on touching lines make one hit (as ripgrep prints them)."""
    starts = [0]
    pos = text.find("\n")
    while pos >= 0:
        starts.append(pos + 1)
        pos = text.find("\n", pos + 1)
    lines = text.split("\n")
    groups: List[List[int]] = []  # [first line, last line, column] (0-based lines)
    count = 0
    for found in q.regex.finditer(text):
        first = bisect.bisect_right(starts, found.start()) - 1
        last = bisect.bisect_right(starts, max(found.start(), found.end() - 1)) - 1
        count += 1
        if groups and first <= groups[-1][1] + 1:
            groups[-1][1] = max(groups[-1][1], last)
        else:
            if q.mode == "content" and want and len(groups) >= want:
                break
            groups.append([first, last, found.start() - starts[first] + 1])
    if q.mode == "count":
        return count, []
    hits = [(g[0] + 1, g[1] + 1, g[2], [_strip_cr(x) for x in lines[g[0] : g[1] + 1]]) for g in groups]
    return len(hits), hits


def _search_file(q: _Query, rel: str) -> Optional[_FileHits]:
    """The hits of one file, or None when it is binary, unreadable or has none."""
    want = q.per_file + 1 if q.mode == "content" else (1 if q.mode == "files" else 0)
    try:
        with os.fdopen(_open_file(q, rel), "rb") as handle:
            if os.fstat(handle.fileno()).st_size > WHOLE_READ and not q.multiline:
                return _search_stream(q, handle, want)
            data = handle.read()
    except (OSError, DaemonError):  # unreadable, or outside the roots
        return None
    if b"\0" in data:
        return None
    text = data.decode("utf-8", "replace")
    if q.multiline:
        if q.regex.search(text) is None:
            return None
        count, hits = _scan_multiline(q, text, want)
    else:
        text = text.replace("\r\n", "\n")
        if q.regex.search(text) is None:
            return None
        lines = text.split("\n")
        if lines[-1] == "":
            lines.pop()
        count, hits = _scan_lines(q, lines, want)
    if not count:
        return None
    result = _FileHits()
    result.count, result.hits = count, hits
    return result


def _search_stream(q: _Query, handle: Any, want: int) -> Optional[_FileHits]:
    result = _FileHits()
    search = q.regex.search
    for number, raw in enumerate(handle, 1):
        if b"\0" in raw:
            return None
        if want and result.count >= want:
            continue
        line = raw.decode("utf-8", "replace").rstrip("\n")
        line = line[:-1] if line.endswith("\r") else line
        found = search(line)
        if found is not None:
            result.count += 1
            if q.mode == "content":
                result.hits.append((number, number, len(line[: found.start()]) + 1, [line]))
    return result if result.count else None


def _python_engine(q: _Query, paths: List[str]) -> Tuple[Dict[str, _FileHits], bool, bool]:
    deadline = None if q.timeout is None else time.monotonic() + q.timeout
    found: Dict[str, _FileHits] = {}
    kept = 0
    for path in sorted(set(paths)):
        if deadline is not None and time.monotonic() > deadline:
            return found, True, False
        hits = _search_file(q, path)
        if hits is None:
            continue
        found[path] = hits
        kept += min(hits.count, q.per_file) if q.mode == "content" else 1
        if kept > q.max_total:
            break  # enough to fill the cap and know it is exceeded
    return found, False, False


# ---------------------------------------------------------------- results


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def _context(q: _Query, path: str, hits: List[Hit]) -> List[Tuple[List[List[Any]], List[List[Any]]]]:
    try:
        with os.fdopen(_open_file(q, path), "rb") as handle:
            lines = _line_text(handle.read().decode("utf-8", "replace"))
    except (OSError, DaemonError):
        lines = []

    def numbered(numbers: range) -> List[List[Any]]:
        return [[n, _cut(lines[n - 1], q.max_line_chars)] for n in numbers if n <= len(lines)]

    return [
        (numbered(range(max(1, first - q.before), first)), numbered(range(last + 1, last + q.after + 1)))
        for first, last, _, _ in hits
    ]


def _nlink(q: _Query, rel: str) -> int:
    """How many names a matched file has: the host treats a hard link as possibly a secret's."""
    try:
        return os.stat(rel, dir_fd=q.root_fd, follow_symlinks=False).st_nlink
    except OSError:
        return 1


def _listing(q: _Query, counts: Dict[str, int]) -> Tuple[Dict[str, Any], bool]:
    """Files and count modes: the first ``max_total`` paths, and whether there were more."""
    paths = sorted(counts)
    truncated = len(paths) > q.max_total
    del paths[q.max_total :]
    listing: Dict[str, Any] = {"paths": paths, "linked": [p for p in paths if _nlink(q, p) > 1]}
    if q.mode == "count":
        listing["counts"] = [counts[p] for p in paths]
    return listing, truncated


def _content(q: _Query, found: Dict[str, _FileHits]) -> Tuple[Dict[str, Any], bool]:
    files: List[Dict[str, Any]] = []
    budget = q.max_total
    size = 0
    truncated = False
    for path in sorted(found):
        if budget <= 0 or size > MAX_REPLY_TEXT:
            truncated = True
            break
        hits = found[path]
        shown = hits.take(min(q.per_file, budget))
        budget -= len(shown)
        context = _context(q, path, shown) if (q.before or q.after) else [([], [])] * len(shown)
        matches = []
        for (first, last, column, lines), (before, after) in zip(shown, context):  # noqa: B905 (strict= needs Python 3.10)
            texts = [_cut(line, q.max_line_chars) for line in lines]
            size += sum(len(t) for t in texts)
            matches.append(
                {"line": first, "end_line": last, "column": column, "lines": texts, "before": before, "after": after}
            )
        cut = hits.count > len(shown)
        truncated = truncated or cut
        files.append(
            {"path": path, "count": len(shown), "truncated": cut, "matches": matches, "nlink": _nlink(q, path)}
        )
    return {"files": files}, truncated


# A group under a quantifier, a back-reference, or many unbounded quantifiers: patterns whose
# matching time can explode. The Python engine runs them in a child process (search_child).
_QUANTIFIED_GROUP = re.compile(r"\)(?:[*+]|\{\d*,)")
_BACKREFERENCE = re.compile(r"\\[1-9]|\(\?P=")
_UNBOUNDED = re.compile(r"(?<!\\)[*+]")
# Output of the child: the reply, which the host caps the same way.
MAX_CHILD_REPLY = MAX_REPLY_TEXT * 2
# Time the child gets when the request names no timeout.
DEFAULT_CHILD_TIMEOUT = 300.0


def _may_backtrack(pattern: str) -> bool:
    return bool(
        _QUANTIFIED_GROUP.search(pattern) or _BACKREFERENCE.search(pattern) or len(_UNBOUNDED.findall(pattern)) >= 3
    )


def _isolated(args: Dict[str, Any], blob: bytes, timeout: Optional[float]) -> Reply:
    """The same search in ``sandbox.search_child``, killed at the timeout."""
    root = resolve_user(0)
    env = {"PATH": os.environ.get("PATH", DEFAULT_PATH), "HOME": root.home,
           "PYTHONPATH": os.environ.get("PYTHONPATH", ""), "PYTHONDONTWRITEBYTECODE": "1"}
    spec = Spec([sys.executable, "-m", "sandbox.search_child"], None, "grep (python engine)", "/", env, root)
    proc = Proc(spec, Stream(MAX_CHILD_REPLY, ring=False), Stream(64 * 1024, ring=False))
    table().start(proc, stdin_pipe=True, timeout=timeout or DEFAULT_CHILD_TIMEOUT)
    cancel.track(proc)
    proc.write_stdin(json.dumps(args).encode() + b"\n" + blob, close=True)
    with proc.cond:
        while not proc.finished:
            proc.cond.wait()
    if proc.timed_out:
        return {"engine": "python", "files": [], "truncated": False, "timed_out": True}, b""
    try:
        reply = json.loads(bytes(proc.out.buf))
    except ValueError:
        raise DaemonError("internal", "the search process failed: %s" % bytes(proc.err.buf)[-300:].decode("utf-8", "replace")) from None
    if "error" in reply:
        raise DaemonError(reply["error"]["code"], reply["error"]["message"])
    return reply, b""


def op_grep(args: Dict[str, Any], blob: bytes, isolated: bool = False) -> Reply:
    """``isolated``: this is the search's own process already (``search_child``)."""
    q = _Query(args)
    paths = None
    if args["paths_in_blob"]:
        paths = [p for p in blob.decode("utf-8", "surrogateescape").split("\0") if p]
        if any(p.startswith("/") or p == ".." or p.startswith("../") or "/../" in p for p in paths):
            raise DaemonError("bad_request", "paths must be relative to root and stay below it")
    rg = shutil.which("rg")
    engine = q.engine if q.engine != "auto" else ("rg" if rg else "python")
    if engine == "rg" and not rg:
        raise DaemonError("bad_request", "ripgrep is not installed in this image")
    if engine == "rg" and paths is not None and args["roots"] is not None:
        # ripgrep follows links in the paths it is given; the Python engine opens each one
        # beneath the roots (same results, by design).
        engine = "python"
    if engine == "python" and paths is None:
        raise DaemonError("bad_request", "the python engine searches the file list the host sends (paths_in_blob)")
    if engine == "python" and not q.fixed and not isolated and _may_backtrack(q.pattern):
        return _isolated(args, blob, q.timeout)
    with fs_access(args) as res:
        q.res = res
        q.root_fd = _open_root(res, q.root)
        found: Dict[str, _FileHits] = {}
        counts: Dict[str, int] = {}
        try:
            if engine == "python":
                found, timed_out, cut = _python_engine(q, paths or [])
                if q.mode != "content":
                    counts = {p: h.count for p, h in found.items()}
            elif q.mode == "content":
                found, timed_out, cut = _rg_engine(q, rg or "rg", paths)
            else:
                counts, timed_out, cut = _rg_counts(q, rg or "rg", paths)
            if engine == "rg":
                found, counts = q.walk.selected(found), q.walk.selected(counts)
            reply, truncated = _content(q, found) if q.mode == "content" else _listing(q, counts)
        finally:
            os.close(q.root_fd)
    reply.update(engine=engine, truncated=truncated or cut, timed_out=timed_out)
    return reply, b""


def op_find(args: Dict[str, Any], blob: bytes) -> Reply:
    """Files below ``root`` whose relative path fully matches ``regex`` (Python syntax; the
    host translates a glob), found by ``rg --files`` with the same rules as grep's walk
    (``hidden``, ``no_ignore``, ``globs``), newest first (then by path), one page of them.
    ``type_globs``: file-name globs every match satisfies (ripgrep drops the others itself;
    unlike ``--glob`` a type keeps ignored files out, but it lets hidden ones in: dropped here).

    result: ``total``, ``files`` [[path, mtime]] for ``offset``..``offset + limit``, ``timed_out``.
    """
    root = abspath(args, "root").rstrip("/") or "/"
    try:
        regex = re.compile(args["regex"])
    except re.error as exc:
        raise DaemonError("bad_request", "invalid regex: %s" % exc) from None
    sort = args["sort"]
    offset = args["offset"]
    limit = args["limit"]
    rg = shutil.which("rg")
    if rg is None:
        raise DaemonError("bad_request", "ripgrep is not installed in this image; list files with walk")
    walk = _Walk(args)
    argv = [rg] + _RG_BASE + ["--files", "--null"] + walk.argv
    with fs_access(args) as res:
        root_fd = _open_root(res, root)
        try:
            found: List[Tuple[float, str]] = []
            match = regex.fullmatch

            def take(records: bytes) -> None:
                # Thousands of names: each step is one pass in C where it can be.
                names = walk.kept([_relative(p) for p in records.decode("utf-8", "surrogateescape").split("\0") if p])
                if walk.type_globs and not walk.hidden:
                    names = [p for p in names if not p.rpartition("/")[2].startswith(".")]
                found.extend(_mtimes([p for p in names if match(p)], root_fd))

            _, timed_out, _ = _spawn(
                argv + ["--", "."], root_fd, request_user(args), args["timeout"], b"\0", take
            )
        finally:
            os.close(root_fd)
    found.sort(key=operator.itemgetter(1))
    if sort == "modified":
        found.sort(key=operator.itemgetter(0), reverse=True)  # stable: equal times stay by path
    page = [[path, mtime] for mtime, path in found[offset : offset + limit]]
    return {"total": len(found), "files": page, "timed_out": timed_out}, b""


def _mtimes(paths: List[str], root_fd: int) -> List[Tuple[float, str]]:
    """(mtime, path) of each path below ``root_fd`` that is still there."""
    found = []
    for path in paths:
        try:
            found.append((os.stat(path, dir_fd=root_fd, follow_symlinks=False).st_mtime, path))
        except OSError:
            continue  # removed meanwhile
    return found


OPS = {"grep": op_grep, "find": op_find}
