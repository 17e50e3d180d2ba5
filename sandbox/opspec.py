"""Every operation of the daemon's protocol, declared once: its arguments (name, type,
required or default, bounds, choices), its result fields, and what its blobs carry.

The daemon checks each request against it before the op runs (``parse``: an unknown,
missing or mistyped argument is refused with one ``bad_request`` that names the op's
usage) and hands the op its arguments with the defaults filled in; the host's client
checks what it sends with the same rules (``check``), and docs/protocol.md's per-op
tables are generated from it. Standard library only, Python >= 3.8: the host imports
this module too.
"""

import math
from typing import Any, Dict, List, NamedTuple, Optional, Tuple, cast

from .errors import REQUIRED, DaemonError
from .limits import MAX_BLOB, MAX_OUTPUT_MAX

# Argument types, as JSON names them.
STRING = "string"
INTEGER = "integer"
NUMBER = "number"
BOOLEAN = "boolean"
LIST = "list"
OBJECT = "object"
NAME_OR_ID = "string or integer"

_PYTHON_TYPES: Dict[str, Tuple[type, ...]] = {
    STRING: (str,),
    INTEGER: (int,),
    NUMBER: (int, float),
    BOOLEAN: (bool,),
    LIST: (list,),
    OBJECT: (dict,),
    NAME_OR_ID: (str, int),
}
_ARTICLES = {STRING: "a string", INTEGER: "an integer", NUMBER: "a number", BOOLEAN: "a boolean",
             LIST: "a list", OBJECT: "an object", NAME_OR_ID: "a string or an integer"}
# Longest a duration in seconds may be (about 31 years): a finite number for every clock.
MAX_SECONDS = 1e9


class Arg(NamedTuple):
    name: str
    kind: str
    # None: optional, null means "none" (see doc). Never mutable: every request shares it.
    default: Any = REQUIRED
    doc: str = ""
    low: Optional[float] = None  # bounds, inclusive, for integers and numbers
    high: Optional[float] = None
    choices: Tuple[str, ...] = ()
    shown: str = ""  # how the docs show the default, where its JSON form says less (modes)


class Out(NamedTuple):
    name: str
    doc: str = ""
    fields: Tuple[str, ...] = ()  # the fields of each entry, for a list of objects


class Op(NamedTuple):
    name: str
    doc: str
    args: Tuple[Arg, ...] = ()
    results: Tuple[Out, ...] = ()
    blob_in: str = ""
    blob_out: str = ""


def _seconds(name: str, doc: str, default: Any = None) -> Arg:
    return Arg(name, NUMBER, default, doc, low=0, high=MAX_SECONDS)


# Every file op: whose credentials, beneath which roots (docs/protocol.md explains both).
FS_ARGS = (
    Arg("as_user", NAME_OR_ID, None, "the op's file access runs with this user's fsuid, fsgid and groups "
        "(null: the daemon's own, root)"),
    Arg("roots", LIST, None, "absolute directories the path must lie and resolve beneath (null: anywhere)"),
    Arg("decided", OBJECT, None, "path as given -> the real paths the host's policy decided on (what it "
        "resolves to; for a link, also the link): reaching anything else is refused with conflict (null: no check)"),
)
_TIMEOUT = _seconds("timeout", "seconds before the command's tree is killed (null: none)")
# What starts a command (exec, spawn).
COMMAND_ARGS = (
    Arg("argv", LIST, None, "the program and its arguments (exactly one of argv and command)"),
    Arg("command", STRING, None, "a command line run by `bash -c`"),
    Arg("cwd", STRING, None, "absolute working directory (null: the workspace)"),
    Arg("env", OBJECT, None, "variables merged over the daemon's base environment; a null value unsets one"),
    Arg("user", NAME_OR_ID, None, "who runs it (null: the configured agent user)"),
    Arg("confine", OBJECT, None, "the level the policy approved: {level, write_roots, network, egress_port, "
        "metadata} (see Confinement of commands; null: none)"),
)
_FILE_META = ("type", "size", "mode", "mtime", "uid", "gid", "nlink", "target")
_STATUS = (
    Out("running", "the task still runs"),
    Out("exit_code", "null while running or when killed by a signal"),
    Out("signal", "the signal number that ended it, or null"),
    Out("timed_out", "its timeout killed it"),
    Out("out_of_memory", "only when true: the memory watch killed it (gVisor)"),
)
_OFFSETS = (
    Out("stdout_offset", "the next offset to read stdout from"),
    Out("stderr_offset", "the next offset to read stderr from"),
    Out("stdout_dropped", "stdout bytes no longer kept (the kept window is output_max)"),
    Out("stderr_dropped", "stderr bytes no longer kept"),
)
_SEARCH_WALK = (
    Arg("globs", LIST, (), "ripgrep's override globs (later wins, `!` excludes)"),
    Arg("type_globs", LIST, (), "file-name globs every result satisfies (a file type: ignored files stay ignored)"),
    Arg("hidden", BOOLEAN, False, "walk hidden files and directories too"),
    Arg("no_ignore", BOOLEAN, False, "walk files the ignore files exclude too"),
)
_TASK_ID = Arg("task_id", STRING, doc="the id `spawn` gave")
_CONN = Arg("conn", INTEGER, doc="a connection's id from `net_accept`")

OPS: Tuple[Op, ...] = (
    Op("ping", "What this daemon is and what the kernel under it can enforce.", (), (
        Out("version", "the daemon's version"),
        Out("protocol", "the protocol version"),
        Out("python", "the interpreter's version"),
        Out("rg", "ripgrep's path, or null"),
        Out("pid", "the daemon's pid"),
        Out("uid", "the daemon's uid"),
        Out("landlock", "the kernel's Landlock ABI; 0: none, e.g. under gVisor"),
        Out("levels", '"landlock", "views" (gVisor: read-only views and chroot), or null: treat every command as dangerous'),
        Out("clone_exec", "the daemon has clone-exec, its native spawner, used where the kernel honours CLONE_PARENT"),
    )),
    Op("stat", "A file's metadata; optionally the head of a regular file, or where a missing path would be.", (
        Arg("path", STRING, doc="absolute path"),
        Arg("follow", BOOLEAN, True, "follow a symbolic link at the end"),
        Arg("read", INTEGER, 0, "with follow, also give this many bytes of a regular file the caller can read "
            "(the blob), from the very file realpath names", low=0, high=MAX_BLOB),
        Arg("nearest", BOOLEAN, False, "a missing path also gives `nearest`: the real path a new file there would have"),
        Arg("writable", BOOLEAN, False, "a regular file also gives `writable`: whether the caller may open it for writing"),
    ) + FS_ARGS, (
        Out("exists"),
        Out("type", "file, dir, symlink or other"),
        Out("size"), Out("mode", "st_mode"), Out("mtime"), Out("uid"), Out("gid"),
        Out("nlink", "the number of names: hard links"),
        Out("target", "a symbolic link's text, or null"),
        Out("realpath", "the kernel's name of the descriptor opened, links resolved"),
        Out("entry", "for a symbolic link at the end: the link's own real path (its directory's realpath and name)"),
        Out("read_eof", "with read: the blob is the whole file"),
        Out("sha256", "with read, when read_eof: the whole file's hash"),
        Out("nearest", "with nearest, when missing: where a write would create it (a dangling link followed), else "
            "its deepest existing ancestor's realpath joined with the rest"),
        Out("writable", "with writable, for a regular file: opened for writing as the caller, it was (nothing written)"),
    ), blob_out="with `read`: the file's first bytes"),
    Op("read", "A byte range of a regular file.", (
        Arg("path", STRING, doc="absolute path"),
        Arg("offset", INTEGER, 0, "first byte", low=0),
        Arg("length", INTEGER, -1, "bytes to read (-1: to the end)", low=-1),
        Arg("max_bytes", INTEGER, None, "refuse with too_large if the selected range is longer", low=0),
        Arg("hash", BOOLEAN, False, "also give the whole file's sha256"),
        Arg("max_size", INTEGER, None, "refuse with output_limit if the whole file is larger", low=0),
        Arg("plain", BOOLEAN, False, "refuse with not_plain unless the path is the real one: no symbolic link on "
            "the way, a regular file, its only name (checked on the descriptor opened)"),
    ) + FS_ARGS, (
        Out("size", "the whole file's size"), Out("offset"), Out("eof", "the range reached the end"),
        Out("sha256", "with hash: the whole file's"),
    ), blob_out="the bytes"),
    Op("write", "Atomic write (a temporary file renamed over the target), optionally compare-and-swap, in one "
       "request or as a chunked upload; not flushed to disk.", (
        Arg("path", STRING, doc="absolute path (a symbolic link at the end is written through)"),
        Arg("mode", INTEGER, 0o644, "permission bits of a new file", low=0, high=0o7777, shown="0o644"),
        Arg("parents", BOOLEAN, True, "make missing parent directories"),
        Arg("expected_sha256", STRING, None, 'null: no check; "": the file must not exist; else the current '
            "content's hex sha256 (conflict otherwise)"),
        Arg("upload", STRING, None, "an id joining the chunks of one upload"),
        Arg("final", BOOLEAN, None, "the upload's last chunk (default: true without upload, false with)"),
        Arg("owner", NAME_OR_ID, None, "owner of a new file (ignored with as_user)"),
        Arg("plain", BOOLEAN, False, "refuse with not_plain, writing and making nothing, unless the path is the "
            "real one: its parent exists and is reached through no symbolic link, the target is no link and a "
            "regular file's only name"),
        Arg("keep_old", INTEGER, -1, "also report what was replaced, its content when no larger than this many "
            "bytes (-1: no)", low=-1),
    ) + FS_ARGS, (
        Out("created"), Out("size"), Out("sha256"),
        Out("old_sha256", 'with keep_old: the replaced content\'s hash, "" when nothing was replaced'),
        Out("old_kept", "with keep_old: the old content is the blob"),
    ), blob_in="the data (of this chunk)", blob_out="with `keep_old`: the replaced content"),
    Op("list", "A directory's entries (lstat, unsorted).", (
        Arg("path", STRING, doc="absolute path of a directory"),
    ) + FS_ARGS, (
        Out("entries", "one per entry", ("name",) + _FILE_META),
    )),
    Op("walk", "A tree's entries, depth first in name order; symbolic links are listed, never followed.", (
        Arg("path", STRING, doc="absolute path of a directory"),
        Arg("include_hidden", BOOLEAN, False, "list entries whose name starts with a dot"),
        Arg("max_entries", INTEGER, 200000, "most entries (then truncated)", low=0),
        Arg("ignore_files", LIST, (".gitignore",), "names of ignore files whose content to report"),
        Arg("detail", BOOLEAN, False, "also each entry's permission bits and a link's target"),
    ) + FS_ARGS, (
        Out("entries", "path is relative and /-separated", ("path", "type", "size", "mtime", "mode", "target")),
        Out("ignore", "relative directory: the content of its ignore files"),
        Out("truncated"),
    )),
    Op("mkdir", "Make a directory.", (
        Arg("path", STRING, doc="absolute path"),
        Arg("parents", BOOLEAN, True, "make missing parents (0o755)"),
        Arg("exist_ok", BOOLEAN, True, "a directory already there is no error"),
        Arg("mode", INTEGER, 0o755, "permission bits", low=0, high=0o7777, shown="0o755"),
        Arg("owner", NAME_OR_ID, None, "owner (ignored with as_user)"),
        Arg("plain", BOOLEAN, False, "refuse with not_plain, nothing made at that level, where a symbolic link "
            "leads to where a directory would be made"),
    ) + FS_ARGS, (Out("created"),)),
    Op("remove", "Remove a file, a link (never its target) or a directory.", (
        Arg("path", STRING, doc="absolute path"),
        Arg("recursive", BOOLEAN, False, "remove a directory with its content"),
        Arg("missing_ok", BOOLEAN, False, "a missing path is no error"),
        Arg("plain", BOOLEAN, False, "refuse with not_plain, removing nothing, where a symbolic link leads to the "
            "directory the entry is in"),
    ) + FS_ARGS, (Out("removed"),)),
    Op("rename", "Rename (a link is renamed itself).", (
        Arg("src", STRING, doc="absolute path"),
        Arg("dst", STRING, doc="absolute path"),
        Arg("overwrite", BOOLEAN, True, "replace dst if it exists (else exists)"),
        Arg("plain", BOOLEAN, False, "refuse with not_plain, renaming nothing, where a symbolic link leads to the "
            "directory src or dst is in"),
    ) + FS_ARGS),
    Op("exec", "Run a command to completion.", COMMAND_ARGS + (
        _TIMEOUT,
        Arg("stdout_max", INTEGER, 1 << 20, "stdout bytes kept", low=0, high=MAX_BLOB, shown="1 MiB"),
        Arg("stderr_max", INTEGER, 1 << 20, "stderr bytes kept", low=0, high=MAX_BLOB, shown="1 MiB"),
    ), (
        Out("stdout_len", "the blob's first stdout_len bytes are stdout"),
        Out("exit_code", "null if killed"), Out("signal"), Out("timed_out"),
        Out("out_of_memory", "only when true: the memory watch killed it (gVisor)"),
        Out("stdout_total"), Out("stderr_total"), Out("stdout_truncated"), Out("stderr_truncated"),
        Out("duration", "seconds"),
        Out("confined", "with confine: whether a level was enforced"),
    ), blob_in="stdin", blob_out="stdout + stderr"),
    Op("spawn", "Start a background task whose output the daemon keeps.", COMMAND_ARGS + (
        _seconds("timeout", "background timeout (null: none)"),
        Arg("output_max", INTEGER, 8 << 20, "bytes kept per stream", low=0, high=MAX_OUTPUT_MAX, shown="8 MiB"),
        Arg("keep", STRING, "tail", "which bytes are kept: the newest, or the first (as exec)",
            choices=("tail", "head")),
        Arg("stdin", BOOLEAN, True, "false: stdin at EOF from the start"),
        Arg("name", STRING, None, "a name for task_list"),
    ), (
        Out("task_id"), Out("pid"),
        Out("confined", "with confine: whether a level was enforced"),
    ), blob_in="the start of stdin"),
    Op("task_read", "A task's output from byte offsets (nothing lost or repeated).", (
        _TASK_ID,
        Arg("stdout_offset", INTEGER, 0, "where to read stdout from (past the end: bad_request)", low=0),
        Arg("stderr_offset", INTEGER, 0, "where to read stderr from", low=0),
        Arg("max_bytes", INTEGER, 1 << 20, "most bytes, shared fairly between the streams", low=0, high=MAX_BLOB,
            shown="1 MiB"),
        _seconds("wait", "seconds to wait for new output or the exit", 0),
    ), (Out("stdout_len", "the blob's first stdout_len bytes are stdout"),) + _OFFSETS + _STATUS,
        blob_out="stdout + stderr"),
    Op("task_write", "Write to a task's stdin.", (
        _TASK_ID,
        Arg("close", BOOLEAN, False, "close stdin afterwards"),
    ), (Out("written"),), blob_in="the bytes"),
    Op("task_signal", "Signal a task (its whole tree by default).", (
        _TASK_ID,
        Arg("signal", NAME_OR_ID, "KILL", "a name (KILL, SIGTERM) or number"),
        Arg("tree", BOOLEAN, True, "every process of its tree"),
    ), (Out("signalled"),)),
    Op("task_wait", "Wait for a task to end.", (
        _TASK_ID,
        _seconds("timeout", "seconds to wait (null: until it ends)"),
    ), _STATUS + _OFFSETS),
    Op("task_forget", "Drop a task and its output, killing it first if it still runs.", (_TASK_ID,), (
        Out("killed", "it was still running"),
    )),
    Op("task_list", "Every task.", (), (
        Out("tasks", "one per task", ("task_id", "pid", "name", "command", "running", "exit_code", "signal",
                                       "timed_out", "started", "ended", "stdout_total", "stderr_total")),
    )),
    Op("net_listen", "Listen on 127.0.0.1:port for the egress relay (once; a second call answers where it "
       "listens). The net ops do not count as activity for the idle timeout.", (
        Arg("port", INTEGER, doc="the port", low=1, high=65535),
    ), (Out("port"),)),
    Op("net_accept", "The next accepted connection.", (
        Arg("wait", NUMBER, 10, "seconds to wait (at most 60)", low=0),
    ), (Out("conn", "its id; 0 when none came within wait"),)),
    Op("net_read", "What the program sent on a connection.", (
        _CONN,
        Arg("max", INTEGER, 1 << 20, "most bytes (at most 1 MiB)", low=1, shown="1 MiB"),
        Arg("wait", NUMBER, 10, "seconds to wait (at most 60)", low=0),
    ), (
        Out("eof", "the program shut its side, or reset"),
        Out("idle", "nothing came within wait"),
    ), blob_out="the bytes"),
    Op("net_write", "Send bytes to the program, whole.", (_CONN,), (
        Out("closed", "the program is gone or did not read for 120 s"),
    ), blob_in="the bytes"),
    Op("net_close", "End a connection, or say the far end is done sending.", (
        _CONN,
        Arg("how", STRING, "both", '"write": the far end is done sending; "both": forget it',
            choices=("both", "write")),
    )),
    Op("grep", "Content search: ripgrep when the image has it, else the Python engine over the file list the "
       "host sends, with identical results (sandbox/search.py). A Python-engine pattern that may backtrack "
       "catastrophically runs in a child process that the timeout kills.", (
        Arg("root", STRING, doc="absolute directory the results' paths are relative to"),
        Arg("pattern", STRING, doc="the regex (the dialect both engines share) or literal"),
        Arg("engine", STRING, "auto", "auto: ripgrep when installed", choices=("auto", "rg", "python")),
        Arg("mode", STRING, "content", "matching lines, matching files, or counts per file",
            choices=("content", "files", "count")),
        Arg("fixed_strings", BOOLEAN, False, "the pattern is a literal"),
        Arg("ignore_case", BOOLEAN, False, "case-insensitive"),
        Arg("multiline", BOOLEAN, False, "`.` matches newlines; matches on touching lines form one result"),
        Arg("paths_in_blob", BOOLEAN, False, "search the files the blob names (with roots: by the Python engine)"),
    ) + _SEARCH_WALK + (
        Arg("max_total", INTEGER, 1000, "most matches (content) or files shown", low=0),
        Arg("max_per_file", INTEGER, None, "most matches shown per file (null: max_total)", low=0),
        Arg("max_line_chars", INTEGER, 2000, "longer lines are cut", low=0),
        Arg("before", INTEGER, 0, "lines of context before each match", low=0, high=10000),
        Arg("after", INTEGER, 0, "lines of context after each match", low=0, high=10000),
        _seconds("timeout", "seconds before the search stops (timed_out)"),
    ) + FS_ARGS, (
        Out("engine", "rg or python"), Out("truncated"), Out("timed_out"),
        Out("files", "content mode", ("path", "count", "truncated", "nlink", "matches")),
        Out("paths", "files and count modes: sorted relative paths"),
        Out("linked", "files and count modes: those of paths with more than one name"),
        Out("counts", "count mode: the matches in each of paths"),
    ), blob_in="with `paths_in_blob`: relative paths, NUL-separated"),
    Op("find", "Files below root whose relative path fully matches a regex, found by `rg --files` with grep's "
       "walk rules, one page of them.", (
        Arg("root", STRING, doc="absolute directory"),
        Arg("regex", STRING, doc="Python regex the relative path must fully match"),
    ) + _SEARCH_WALK + (
        Arg("sort", STRING, "modified", "newest first (then by path), or by path", choices=("modified", "path")),
        Arg("offset", INTEGER, 0, "first result of the page", low=0),
        Arg("limit", INTEGER, 1000, "results in the page", low=0),
        _seconds("timeout", "seconds before the listing stops (timed_out)"),
    ) + FS_ARGS, (
        Out("total", "matches in all"),
        Out("files", "[path, mtime] of the page"),
        Out("timed_out"),
    )),
    Op("cancel", "Kill, tree and all, the processes a request still running started (sent by the host when its "
       "caller gives up).", (
        Arg("request", INTEGER, doc="the id of that request"),
    ), (Out("killed", "how many"),)),
)

SPEC: Dict[str, Op] = {op.name: op for op in OPS}
# Ops that open paths (they take as_user and roots), and ops that start commands.
FILE_OPS = frozenset(op.name for op in OPS if FS_ARGS[0] in op.args)
COMMAND_OPS = frozenset(op.name for op in OPS if COMMAND_ARGS[0] in op.args)


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    for kind in (INTEGER, NUMBER, STRING, LIST, OBJECT):
        if isinstance(value, _PYTHON_TYPES[kind]):
            return _ARTICLES[kind]
    return type(value).__name__


def usage(op: Op) -> str:
    """``read(path: string, offset: integer = 0, ...)``: what a request of ``op`` may hold."""
    parts = ("%s: %s" % (arg.name, arg.kind)
             + ("" if arg.default is REQUIRED else " = " + (arg.shown or _literal(arg.default))) for arg in op.args)
    return "%s(%s)" % (op.name, ", ".join(parts))


def _literal(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"%s"' % value
    if isinstance(value, (list, tuple)):
        return "[%s]" % ", ".join(_literal(v) for v in value)
    return repr(value)


class _Rule(NamedTuple):
    arg: Arg
    types: Tuple[type, ...]
    no_bool: bool  # JSON true is no integer here
    bounded: bool
    low: float
    high: float


class _Compiled(NamedTuple):
    op: Op
    rules: Dict[str, _Rule]
    required: Tuple[str, ...]
    defaults: Dict[str, Any]


def _compile(op: Op) -> _Compiled:
    rules = {}
    for arg in op.args:
        types = _PYTHON_TYPES[arg.kind]
        bounded = arg.low is not None or arg.high is not None
        rules[arg.name] = _Rule(
            arg, types, bool not in types, bounded,
            -math.inf if arg.low is None else arg.low, math.inf if arg.high is None else arg.high,
        )
    required = tuple(arg.name for arg in op.args if arg.default is REQUIRED)
    defaults = {arg.name: arg.default for arg in op.args if arg.default is not REQUIRED}
    return _Compiled(op, rules, required, defaults)


_COMPILED = {op.name: _compile(op) for op in OPS}


def _refuse(op: Op, problem: str) -> DaemonError:
    return DaemonError("bad_request", "%s: %s; usage: %s" % (op.name, problem, usage(op)))


def check(name: str, args: Dict[str, Any]) -> _Compiled:
    """Refuse (``bad_request``) a request of op ``name`` whose arguments the spec does not
    allow: an unknown op or argument, a required one missing or null, a value of the wrong
    type, out of bounds or not among the choices. Null stands for an optional argument's default."""
    compiled = _COMPILED.get(name)
    if compiled is None:
        raise DaemonError("bad_request", "unknown op %r; the ops are %s" % (name, ", ".join(sorted(_COMPILED))))
    rules = compiled.rules
    for key, value in args.items():
        rule = rules.get(key)
        if rule is None:
            raise _refuse(compiled.op, "unknown argument %r" % (key,))
        if value is None:
            continue
        arg, types, no_bool, bounded, low, high = rule  # a plain unpack: this runs per request
        if not isinstance(value, types) or (no_bool and isinstance(value, bool)):
            problem = "argument %r must be %s, not %s" % (key, _ARTICLES[arg.kind], _json_type(value))
            raise _refuse(compiled.op, problem)
        if bounded and not low <= cast(float, value) <= high:  # NaN fails too
            raise _refuse(compiled.op, "argument %r is %r, out of %s" % (key, value, _bounds(arg)))
        if arg.choices and value not in arg.choices:
            choices = ", ".join(_literal(c) for c in arg.choices)
            raise _refuse(compiled.op, "argument %r is %s, not one of %s" % (key, _literal(value), choices))
    for key in compiled.required:
        if args.get(key) is None:
            raise _refuse(compiled.op, "missing argument %r (%s)" % (key, _ARTICLES[rules[key].arg.kind]))
    return compiled


def parse(name: str, args: Dict[str, Any]) -> Dict[str, Any]:
    """``args`` checked (see ``check``), with every argument present: null or absent ones
    hold their default."""
    compiled = check(name, args)
    full = dict(compiled.defaults)
    for key, value in args.items():
        if value is not None:
            full[key] = value
    return full


def _bounds(arg: Arg) -> str:
    if arg.low is not None and arg.high is not None:
        return "%s to %s" % (_number(arg.low), _number(arg.high))
    if arg.low is not None:
        return "at least %s" % _number(arg.low)
    return "at most %s" % _number(arg.high)


def _number(value: Optional[float]) -> str:
    return "%d" % value if value is not None and float(value).is_integer() else repr(value)


def describe(op: Op) -> List[Tuple[str, str, str, str]]:
    """Rows (argument, type, default, meaning) of ``op``'s arguments, as the docs show them."""
    rows = []
    for arg in op.args:
        default = "required" if arg.default is REQUIRED else arg.shown or _literal(arg.default)
        meaning = arg.doc
        if arg.choices:
            meaning += " (%s)" % " / ".join(_literal(c) for c in arg.choices)
        if arg.low is not None or arg.high is not None:
            meaning += " (%s)" % _bounds(arg)
        rows.append((arg.name, arg.kind, default, meaning))
    return rows
