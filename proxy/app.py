"""``create_app``: the standalone proxy as one ASGI app (``uvicorn 'proxy.app:create_app' --factory``).

The app is :class:`~proxy.middleware.NormalizerMiddleware` around a
:class:`~proxy.forward.Forwarder` to the configured upstream: the rules never know which mode they
run in. Settings come from the argument or, when it is ``None``, from ``MCP_NORMALIZER_*``
environment variables.
"""

from __future__ import annotations

import logging

from .config import NormalizerConfig, Settings
from .forward import Forwarder
from .logs import configure_logging
from .middleware import NormalizerMiddleware


def create_app(settings: Settings | None = None, *, config: NormalizerConfig | None = None) -> NormalizerMiddleware:
    """Build the standalone proxy app.

    Args:
        settings: process settings; ``None`` reads them from the environment.
        config: the rule configuration; ``None`` loads the one ``settings`` select.

    Returns:
        The ASGI app: the normalizer middleware around the httpx forwarder. Its lifespan opens and
        closes the upstream client.

    Raises:
        ConfigError: the settings or the rule file are invalid.
    """
    settings = settings if settings is not None else Settings.from_env()
    config = config if config is not None else settings.load_config()
    if not logging.getLogger("mcp_normalizer").handlers:
        configure_logging(settings.log_level)
    return NormalizerMiddleware(Forwarder(settings.upstream), config, upstream=settings.upstream_label)
