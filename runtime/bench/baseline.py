"""The engine the bench's baselines (``docker exec``, ``docker cp``, a bare ``docker run``)
talk to: they measure Docker itself, so they need the Docker backend's client (and copy the
sandbox image into a second engine measured beside it)."""

from __future__ import annotations

import docker

from caisson.docker.backend import DockerBackend
from caisson.docker.images import has_image, image_tag
from caisson.errors import CaissonError
from caisson.runtime import Runtime


def docker_backend(rt: Runtime) -> DockerBackend:
    if not isinstance(rt.backend, DockerBackend):
        raise CaissonError("caisson bench compares with Docker's own commands: it needs the Docker backend")
    return rt.backend


def docker_client(rt: Runtime) -> docker.DockerClient:
    return docker_backend(rt).client


def default_image() -> str:
    return image_tag()


def copy_default_image(rt: Runtime, beside: Runtime) -> None:
    """The sandbox image of ``rt``'s engine, streamed into ``beside``'s where it lacks it (the
    engine beside is then measured on the same image, with no build or registry)."""
    tag = image_tag()
    if not has_image(docker_client(beside), tag):
        docker_client(beside).images.load(docker_client(rt).images.get(tag).save(named=tag))
