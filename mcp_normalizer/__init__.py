"""mcp-normalizer: an ASGI reverse proxy and middleware that makes MCP tool results acceptable to
strict clients, without losing information and without slowing the stream.

Public API:

- :func:`create_app` -- the standalone proxy (``uvicorn 'mcp_normalizer.app:create_app' --factory``).
- :class:`NormalizerMiddleware` -- the same normalizer around an in-process MCP ASGI app.
- :class:`NormalizerConfig`, :class:`Settings` -- rule configuration and process settings.
- :class:`JSONFormatter`, :func:`configure_logging` -- the proxy's JSON log lines, for a host that
  mounts the middleware (the rewrite log is ``mcp_normalizer.rewrite``, at info; unrepaired at warning).
"""

from __future__ import annotations

from importlib import metadata

from .app import create_app
from .config import NormalizerConfig, Settings
from .errors import ConfigError, NormalizerError
from .logs import JSONFormatter, configure_logging
from .middleware import NormalizerMiddleware

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
