"""The primitive client of a session's daemon (``primitives.py``: exec, read, write, list,
walk, spawn, tasks...) and the validated models of its replies (``models.py``)."""
