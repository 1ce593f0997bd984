"""mcp-normalizer: an ASGI reverse proxy and middleware that makes MCP tool results acceptable to
strict clients, without losing information and without slowing the stream.

Public API:

- :func:`create_app` -- the standalone proxy (``uvicorn 'proxy.app:create_app' --factory``).
- :class:`NormalizerMiddleware` -- the same normalizer around an in-process MCP ASGI app.
- :class:`NormalizerConfig`, :class:`Settings` -- rule configuration and process settings.
"""

from __future__ import annotations

from .app import create_app
from .config import NormalizerConfig, Settings
from .errors import ConfigError, NormalizerError
from .middleware import NormalizerMiddleware

__all__ = ["ConfigError", "NormalizerConfig", "NormalizerError", "NormalizerMiddleware", "Settings", "create_app"]
__version__ = "0.1.0"
