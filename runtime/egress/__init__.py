"""Egress by allowlist: a session's programs reach the hosts its policy names through a
proxy relayed by the daemon to the host, which decides, resolves, connects and audits."""

from .gateway import EgressGateway, EgressStats
from .rules import PRESETS, EgressConfigError, EgressRules

__all__ = ["PRESETS", "EgressConfigError", "EgressGateway", "EgressRules", "EgressStats"]
