"""The Python search engine in a process of its own: ``python3 -m sandbox.search_child``.

Python's ``re`` keeps the interpreter lock for a whole match, so a pattern that backtracks
catastrophically (``(a+)+$``) would stall every thread of the daemon. Searches whose pattern
may do that run here instead, where the search's timeout kills the process.

stdin: one line of JSON (the grep op's arguments, as its declaration fills them in), then the blob; stdout: the reply as JSON,
or ``{"error": {"code", "message"}}``.
"""

import json
import sys

from .errors import DaemonError
from .opspec import parse
from .search import op_grep


def main() -> int:
    raw = sys.stdin.buffer.read()
    line, _, blob = raw.partition(b"\n")
    try:
        result, _ = op_grep(parse("grep", json.loads(line)), blob, isolated=True)
    except DaemonError as exc:
        sys.stdout.write(json.dumps({"error": {"code": exc.code, "message": exc.message}}))
        return 3
    sys.stdout.write(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
