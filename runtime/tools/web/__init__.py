"""Web tools, run on the host: web_fetch with its address checks (``fetch.py``) and web_search."""
