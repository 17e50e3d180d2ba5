"""Profiles: each tool specification served exactly as written, on the canonical tools."""

from __future__ import annotations

from collections.abc import Callable

import caisson.tools  # noqa: F401  (registers the canonical tools)
from caisson.errors import CaissonError
from caisson.profiles import aar, agent_air, agentloop, amp, grida
from caisson.profiles.base import Profile, ProfileTool, canonical_profile

PROFILES: dict[str, Callable[[], Profile]] = {
    "caisson": canonical_profile,
    "agent-air": agent_air.build,
    "amp": amp.build,
    "grida": grida.build,
    "aar": aar.build,
    "agentloop": agentloop.build,
}

_cache: dict[str, Profile] = {}


def get_profile(name: str) -> Profile:
    if name not in PROFILES:
        raise CaissonError(f"unknown profile {name!r}; choose one of: {', '.join(sorted(PROFILES))}")
    if name not in _cache:
        _cache[name] = PROFILES[name]()
    return _cache[name]


__all__ = ["PROFILES", "Profile", "ProfileTool", "get_profile"]
