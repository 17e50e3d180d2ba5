"""The ways in from outside the library: the ``caisson`` command line (``cli.py``), the MCP
stdio server (``mcp_server.py``), trajectory replay (``replay.py``), the demo (``demo.py``)
and audit queries (``audit_query.py``). Each is a thin layer over ``Runtime``/``Session``."""
