"""A client of ``caisson serve`` shaped like the library: ``RemoteRuntime(url, api_key)``
in place of ``Runtime()``, and a harness runs its sessions on a hosted platform instead."""

from caisson.remote.client import RemoteError, RemoteRuntime, RemoteSession

__all__ = ["RemoteError", "RemoteRuntime", "RemoteSession"]
