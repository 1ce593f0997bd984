"""``create_app``: the standalone proxy as one ASGI app (``uvicorn 'mcp_normalizer.app:create_app' --factory``).

The app is :class:`~mcp_normalizer.middleware.NormalizerMiddleware` around a
:class:`~mcp_normalizer.hop.forward.Forwarder` to the configured upstream, or around a
:class:`~mcp_normalizer.hop.stdio_upstream.StdioUpstream` serving a stdio server's command
(``[proxy] upstream_cmd``): the rules never know which mode they run in. Settings come from the
argument or, when it is ``None``, from ``MCP_NORMALIZER_*`` environment variables; traces, when the
standard ``OTEL_*`` variables ask for them (:func:`mcp_normalizer.ops.tracing.tracer_provider_from_env`).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from .config import NormalizerConfig, Settings
from .engine.era_bridge import LegacyBridge
from .engine.modern_front import FrontCore
from .errors import ConfigError
from .hop.era_bridge import EraBridge
from .hop.forward import Forwarder
from .hop.front import FrontDoor
from .hop.modern_front import ModernFront
from .hop.server import upstream_connection_limit
from .hop.stdio_upstream import Command, StdioUpstream
from .middleware import NormalizerMiddleware
from .ops.admin import Admin
from .ops.lesson_store import command_identity, http_identity
from .ops.logs import configure_logging
from .ops.metrics import Metrics
from .ops.observe import RequestRecord
from .ops.refusals import RefusalLog
from .ops.tracing import tracer_provider_from_env
from .types import ASGIApp
from .wire.forwarded import ForwardingPolicy, parse_networks
from .wire.hosts import HostPolicy

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider


def create_app(
    settings: Settings | None = None,
    *,
    config: NormalizerConfig | None = None,
    tracer_provider: TracerProvider | None = None,
) -> FrontDoor:
    """Build the standalone proxy app.

    Args:
        settings: process settings; ``None`` reads them from the environment.
        config: the rule configuration; ``None`` loads the one ``settings`` select.
        tracer_provider: where the spans of MCP requests go; ``None``: the one the ``OTEL_*``
            variables configure, else the global one if set, else no tracing.

    Returns:
        The ASGI app, outermost first: the front door (request metrics and access log, the
        request-head limit, the ``Host``/``Origin`` check, the admin endpoints ``livez``,
        ``readyz``, ``metrics``, ``lessons``), the normalizer middleware, with an HTTP upstream the
        modern front (``[proxy] serve_modern_hosts``: 2026-07-28 clients of a legacy-only server) and
        the era bridge (legacy clients of a 2026-07-28-only server), and the forwarder. Lifespan passes
        through to the forwarder, which closes the upstream client.

    Raises:
        ConfigError: the settings or the rule file are invalid, there is no upstream, or ``OTEL_*`` variables ask for
            traces that cannot be sent (the ``[otel]`` extra is not installed, an unknown exporter).
    """
    settings = settings if settings is not None else Settings.from_env()
    config = config if config is not None else settings.load_config()
    if not logging.getLogger("mcp_normalizer").handlers:
        configure_logging(settings.log_level)
    limits = config.proxy
    metrics = Metrics()
    refusals = RefusalLog(metrics, interval=limits.refusal_log_interval)
    owned = tracer_provider is None
    tracer_provider = tracer_provider or tracer_provider_from_env()  # None: the global one, if set
    if not settings.upstream and not limits.upstream_cmd:
        raise ConfigError("no upstream: an upstream URL, or a stdio server's command in [proxy] upstream_cmd")
    inner: Forwarder | StdioUpstream
    if limits.upstream_cmd:
        inner = stdio_upstream(config, metrics, refusals)
        label = f"stdio:{inner.label}"
        command = inner.command
        identity = command_identity(command.argv, command.env, command.cwd)
    else:
        inner = Forwarder(
            settings.upstream,
            connect_timeout=limits.connect_timeout,
            first_byte_timeout=limits.first_byte_timeout,
            idle_timeout=limits.idle_timeout,
            send_timeout=limits.send_timeout,
            max_body_bytes=limits.max_request_bytes,
            metrics=metrics,
            forwarding=ForwardingPolicy(limits.forwarded_headers, parse_networks(limits.trusted_proxies)),
            public_url=limits.public_url,
            max_connections=upstream_connection_limit(limits.max_connections),
            refusals=refusals,
        )
        label = settings.upstream_label
        identity = http_identity(settings.upstream)
    app: ASGIApp = inner
    if isinstance(inner, Forwarder) and limits.upstream_era != "legacy":
        bridge = LegacyBridge(
            limits.upstream_era,
            max_sessions=limits.max_bridged_sessions,
            idle_timeout=limits.bridged_session_idle_timeout,
        )
        app = EraBridge(
            inner,
            bridge,
            max_body_bytes=limits.max_request_bytes,
            max_message_bytes=limits.max_rewrite_bytes,
            ask_timeout=limits.first_byte_timeout,
            send_timeout=limits.send_timeout,
        )
    if isinstance(inner, Forwarder) and limits.serve_modern_hosts:
        front = FrontCore(
            consent=True,
            mode=limits.upstream_era,
            max_sessions=limits.max_bridged_sessions,
            idle_timeout=limits.bridged_session_idle_timeout,
            input_timeout=limits.modern_input_timeout,
        )
        app = ModernFront(
            app, front, max_body_bytes=limits.max_request_bytes, max_message_bytes=limits.max_rewrite_bytes
        )
    middleware = NormalizerMiddleware(
        app,
        config,
        upstream=label,
        identity=identity,
        metrics=metrics,
        tracer_provider=tracer_provider,
        shutdown_tracer_provider=owned and tracer_provider is not None,
    )
    return FrontDoor(
        middleware,
        admin=Admin(
            prefix=limits.admin_prefix,
            metrics=metrics,
            ready=inner.ready,
            lessons=middleware.lessons.as_json,
            withheld=middleware.withheld.as_json,
        ),
        hosts=HostPolicy(limits.allowed_hosts, limits.allowed_origins),
        record=RequestRecord(metrics, access_log=limits.access_log),
        max_header_bytes=limits.max_header_bytes,
        refusals=refusals,
    )


def stdio_upstream(
    config: NormalizerConfig, metrics: Metrics | None = None, refusals: RefusalLog | None = None
) -> StdioUpstream:
    """The app serving the stdio server ``[proxy] upstream_cmd`` names, with the ``[proxy]`` limits.

    Raises:
        ConfigError: the command line or its ``upstream_env`` cannot be read.
    """
    limits = config.proxy
    try:
        command = Command.parse(limits.upstream_cmd, limits.upstream_env, limits.upstream_cwd)
    except ValueError as exc:
        raise ConfigError(f"upstream_cmd: {exc}") from None
    return StdioUpstream(
        command,
        path=config.path or "/mcp",
        max_children=limits.max_children,
        idle_timeout=limits.idle_timeout,
        child_idle_timeout=limits.child_idle_timeout,
        grace=limits.graceful_shutdown,
        max_line=limits.max_message_bytes,
        max_body_bytes=limits.max_request_bytes,
        send_timeout=limits.send_timeout,
        stream_buffer_bytes=limits.stream_buffer_bytes,
        child_buffer_bytes=limits.child_buffer_bytes,
        process_buffer_bytes=limits.process_buffer_bytes,
        max_children_per_client=limits.max_children_per_client,
        metrics=metrics,
        refusals=refusals,
    )
