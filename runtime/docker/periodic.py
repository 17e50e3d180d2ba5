"""A controller thread that does one round of work every period until stopped.

A thread, not a task: it must not depend on the embedding program's event loop, and it must
die with the process (daemon)."""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod


class Periodic(ABC):
    def __init__(self, name: str, period: float) -> None:
        self._period = period
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    @property
    def period(self) -> float:
        return self._period

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self._period):
            self.tick()

    @abstractmethod
    def tick(self) -> None:
        """One round; it must not raise (an engine hiccup is for the next round to retry)."""
