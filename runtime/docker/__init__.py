"""Everything caisson asks of the Docker engine: hardened session containers
(``containers.py``), the sandbox image and the daemon injected into any image
(``images.py``), and the reaper of containers whose owner is gone (``reaper.py``)."""
