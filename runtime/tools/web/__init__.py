"""Web tools, run on the host: web_fetch (``fetch.py``: ``guard.py`` decides what may be reached
and pins connections to checked addresses, ``http.py`` fetches with httpx, ``convert.py`` turns
HTML into Markdown) and web_search (``search.py``); per-session settings in ``settings.py``."""
