"""The native helpers as the host builds them (clone-exec, statx-compat.so): compiled once into
the user's cache, and left out (with a warning, sandboxes still starting) where they cannot be
compiled."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from caisson.docker import native
from caisson.docker.native import CLONE_EXEC, STATX_COMPAT


@pytest.fixture(autouse=True)
def fresh(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    native.binary.cache_clear()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    yield
    native.binary.cache_clear()


@pytest.mark.parametrize("helper", [CLONE_EXEC, STATX_COMPAT], ids=lambda h: h.name)
def test_compiled_once_into_the_cache(tmp_path: Path, helper: native.Helper) -> None:
    data = native.binary(helper)
    assert data is not None and data[:4] == b"\x7fELF"
    [cached] = (tmp_path / "cache" / "caisson").iterdir()
    assert cached.read_bytes() == data
    native.binary.cache_clear()
    os.utime(cached, (0, 0))
    assert native.binary(helper) == data and cached.stat().st_mtime == 0  # taken from the cache, not rebuilt


def test_without_a_working_compiler_there_is_none(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    assert native.binary(CLONE_EXEC) is None
    native.binary.cache_clear()
    failing = tmp_path / "failing-cc"
    failing.write_text("#!/bin/sh\necho 'cannot find -lc' >&2\nexit 1\n")
    failing.chmod(0o755)
    monkeypatch.setenv("CC", str(failing))
    assert native.binary(CLONE_EXEC) is None


def test_an_unwritable_cache_means_none(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    assert native.binary(CLONE_EXEC) is None
