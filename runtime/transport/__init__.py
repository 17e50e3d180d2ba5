"""How the host reaches a session's daemon: the container's Docker attach stream
(``attach.py``) and the framed, multiplexed RPC over it (``channel.py``)."""
