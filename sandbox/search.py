"""Search ops (grep and file search: ripgrep when the image has it, else a
pure-Python fallback with identical results) register their handlers here.

Each handler is ``handler(args: dict, blob: bytes) -> (result: dict, blob: bytes)``
and raises ``sandbox.errors.DaemonError`` for errors; the server merges this
``OPS`` table with those of ``fsops`` and ``procs``.
"""

OPS = {}  # type: ignore[var-annotated]
