"""Search tools: ls and glob with gitignore rules (``listing.py``), grep over ripgrep or the
daemon's identical fallback (``grep.py``)."""
