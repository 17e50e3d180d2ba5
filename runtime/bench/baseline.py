"""The engine the bench's baselines (``docker exec``, ``docker cp``, a bare ``docker run``)
talk to: they measure Docker itself, so they need the Docker backend's client."""

from __future__ import annotations

import docker

from caisson.docker.backend import DockerBackend
from caisson.docker.images import image_tag
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
