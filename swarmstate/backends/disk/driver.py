"""apsw, imported here only: without it, importing the disk backend names the extra to install."""

from __future__ import annotations

from swarmstate._errors import MissingDependencyError

try:
    import apsw
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    raise MissingDependencyError(
        'DiskStore needs the apsw package; install it with: pip install "pyswarmstate[disk]"'
    ) from exc

__all__ = ["Connection", "apsw"]

Connection = apsw.Connection
