"""The Docker implementation of the sandbox backend: the only package that imports `docker`."""

from orchestrator.sandbox.docker.backend import DockerBackend
from orchestrator.sandbox.docker.exec import DockerExecHandle

__all__ = ["DockerBackend", "DockerExecHandle"]
