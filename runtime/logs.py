"""caisson's loggers: structlog events rendered as JSON into the standard library's
``caisson.*`` loggers, so the library is silent unless the embedding program configures
logging (a NullHandler stands in until then). The CLI and servers call ``configure``."""

from __future__ import annotations

import logging
import sys
from typing import Any

import structlog

logging.getLogger("caisson").addHandler(logging.NullHandler())


def get_logger(name: str) -> Any:
    """A structlog logger writing to the standard library logger ``name`` (``caisson.*``)."""
    return structlog.wrap_logger(
        logging.getLogger(name),
        wrapper_class=structlog.stdlib.BoundLogger,
        processors=[
            structlog.stdlib.filter_by_level,
            structlog.stdlib.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.JSONRenderer(),
        ],
    )


def configure(verbose: bool = False) -> None:
    """For the CLI and servers: caisson's events as JSON lines on stderr (INFO, or DEBUG)."""
    root = logging.getLogger("caisson")
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    if not any(getattr(h, "caisson_cli", False) for h in root.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        handler.caisson_cli = True  # type: ignore[attr-defined]
        root.addHandler(handler)
