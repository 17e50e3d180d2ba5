"""``caisson bench``: timed runs of the call paths (``runner.py``), the file and search tools
(``file_tools.py``) and the bash tool (``shell.py``), with p50/p95 statistics (``stats.py``),
each beside the baseline it is compared with, measured in the same run."""
