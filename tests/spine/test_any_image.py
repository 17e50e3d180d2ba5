"""The daemon is injected into a plain image that has python3 but no caisson inside."""

from __future__ import annotations

import io

import pytest

from caisson import ImageError, Runtime
from caisson.docker.images import resolve_base

pytestmark = pytest.mark.anyio


def _build(rt: Runtime, tag: str, dockerfile: str) -> str:
    rt.client.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=tag, rm=True, network_mode="none")
    return tag


async def test_plain_image_with_python_works(rt: Runtime) -> None:
    base = resolve_base(rt.client)
    tag = _build(rt, "caisson-test/plain:latest", f"FROM {base}\nRUN mkdir -p /srv/project && echo plain > /srv/project/README\n")
    async with rt.session(image=tag, workdir="/srv/project") as s:
        r = await s.exec("cat README; id -u", timeout=10)
        assert r.stdout == "plain\n1000\n"  # no agent user in the image: uid 1000
        await s.write_file("/srv/project/new.txt", "x")
        assert await s.read_file("/srv/project/new.txt") == b"x"


async def test_image_without_python_is_a_clear_error(rt: Runtime) -> None:
    base = resolve_base(rt.client)
    tag = _build(rt, "caisson-test/nopython:latest", f"FROM {base}\nRUN rm -f /usr/bin/python3*\n")
    with pytest.raises(ImageError) as err:
        async with rt.session(image=tag):
            pass
    assert "python3" in str(err.value)


async def test_missing_image_is_a_clear_error(rt: Runtime) -> None:
    with pytest.raises(ImageError) as err:
        async with rt.session(image="caisson-test/does-not-exist:1"):
            pass
    assert "not present" in str(err.value)
