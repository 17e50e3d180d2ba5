"""Process tools: the bash tool with its persistent shell state (``shell.py``), run_code and
exec (``commands.py``), background tasks and their output (``tasks.py``)."""
