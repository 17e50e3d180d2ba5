"""File tools: read, write and delete (``read_write.py``), edits with fuzzy matching and undo
(``edit.py``, ``matching.py``), diffs and patches (``patch.py``)."""
