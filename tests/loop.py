"""Running a coroutine from a synchronous test.

The session-wide async fixtures keep the test runner's event loop marked as current in the
main thread, so ``anyio.run`` there refuses to start; a fresh thread has no loop of its own."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import anyio

T = TypeVar("T")


def run_async(func: Callable[[], Awaitable[T]]) -> T:
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(anyio.run, func).result()
