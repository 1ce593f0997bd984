"""mcp-normalizer: an ASGI reverse proxy and middleware that makes MCP tool results acceptable to
strict clients, without losing information and without slowing the stream.

Public API:

- :func:`create_app` -- the standalone proxy (``uvicorn 'mcp_normalizer.app:create_app' --factory``).
- :class:`NormalizerMiddleware` -- the same normalizer around an in-process MCP ASGI app.
- :class:`NormalizerConfig`, :class:`Settings` -- rule configuration and process settings.
- :class:`JSONFormatter`, :func:`configure_logging` -- the proxy's JSON log lines, for a host that
  mounts the middleware (the rewrite log is ``mcp_normalizer.rewrite``, at info; unrepaired at warning).

Layers, bottom first (each imports only from itself and those below; ``tests/test_layers.py``):
``types``/``errors``; :mod:`.wire` (bytes and JSON-RPC); :mod:`.engine` with :mod:`.keys` and
:mod:`.config` (rules, schemas, catalogs, the normalizer and transformer); :mod:`.ops` (metrics,
tracing, logs, shared state); :mod:`.hop` (sockets, upstreams, ASGI plumbing); and the entry points
:mod:`.middleware`, :mod:`.app`, :mod:`.cli`, :mod:`.check`, :mod:`.demo`.
"""

from __future__ import annotations

from importlib import metadata
from typing import TYPE_CHECKING, Any

from .config import NormalizerConfig, Settings
from .errors import ConfigError, NormalizerError
from .ops.logs import JSONFormatter, configure_logging

if TYPE_CHECKING:
    from .app import create_app
    from .middleware import NormalizerMiddleware


def __getattr__(name: str) -> Any:
    """The HTTP side (:func:`create_app`, :class:`NormalizerMiddleware`) is imported on first use:
    the ``stdio`` wrapper and ``check`` start without aiohttp, uvicorn and Starlette (PEP 562)."""
    if name == "create_app":
        from .app import create_app

        return create_app
    if name == "NormalizerMiddleware":
        from .middleware import NormalizerMiddleware

        return NormalizerMiddleware
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ConfigError",
    "JSONFormatter",
    "NormalizerConfig",
    "NormalizerError",
    "NormalizerMiddleware",
    "Settings",
    "configure_logging",
    "create_app",
]
__version__ = metadata.version("mcp-normalizer")  # defined once: pyproject.toml [project] version
