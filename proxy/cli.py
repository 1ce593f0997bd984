"""The ``mcp-normalizer`` command.

::

    mcp-normalizer --upstream URL [--host 127.0.0.1] [--port 8765] [--config FILE]
                   [--report-only] [--log-level LEVEL]
    mcp-normalizer demo [--port 8765] [--upstream-port 8766] [--response-mode sse|json] [--once]
    mcp-normalizer check URL [--header 'Name: value' ...] [--call TOOL '{json args}' ...] [--calls FILE]
                             [--format table|json] [--config FILE]     (see proxy.check.command)
    mcp-normalizer check --capture FILE [--format table|json] [--config FILE]

Every flag of the first form can also come from ``MCP_NORMALIZER_<FLAG>`` (flags win). A bad flag,
an unreadable config file or an invalid rule prints one line naming the problem and exits with 2
before anything listens.
"""

from __future__ import annotations

import argparse
import logging
import signal
import socket
import sys
from collections.abc import Sequence
from types import FrameType
from typing import NoReturn, cast

import uvicorn

from .app import create_app
from .config import ProxyConfig, Settings
from .errors import ConfigError
from .logs import configure_logging


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors (``mcp-normalizer: error: ...``) and exit code 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def _proxy_parser() -> Parser:
    parser = Parser(
        prog="mcp-normalizer",
        description="Normalizing reverse proxy for MCP servers (Streamable HTTP). Subcommands: demo, check.",
    )
    parser.add_argument("--upstream", help="upstream MCP endpoint URL (env MCP_NORMALIZER_UPSTREAM)")
    parser.add_argument("--host", help="interface to listen on (default 127.0.0.1; env MCP_NORMALIZER_HOST)")
    parser.add_argument("--port", type=int, help="port to listen on (default 8765; env MCP_NORMALIZER_PORT)")
    parser.add_argument("--config", dest="config_file", help="TOML rule file (env MCP_NORMALIZER_CONFIG)")
    parser.add_argument(
        "--report-only",
        action="store_const",
        const=True,
        help="log every rewrite that would happen, change nothing (env MCP_NORMALIZER_REPORT_ONLY)",
    )
    parser.add_argument(
        "--log-level",
        type=str.lower,
        help="critical, error, warning, info (default) or debug (env MCP_NORMALIZER_LOG_LEVEL)",
    )
    return parser


def _demo_parser() -> Parser:
    parser = Parser(
        prog="mcp-normalizer demo",
        description="Run a legacy Protean-style upstream with the proxy in front and show what strict clients get.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765, help="proxy port (default 8765)")
    parser.add_argument("--upstream-port", type=int, default=8766, help="legacy upstream port (default 8766)")
    parser.add_argument("--response-mode", choices=("sse", "json"), default="sse", help="how the upstream answers")
    parser.add_argument("--once", action="store_true", help="print the comparison and exit instead of serving")
    return parser


def _exit_cleanly(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)


def _fail(message: str) -> int:
    print(f"mcp-normalizer: error: {message}", file=sys.stderr)
    return 2


def bind(host: str, port: int) -> socket.socket:
    """Open the listening socket now, so a taken port fails before anything else starts.

    The socket is made with ``proto=IPPROTO_TCP`` and ``TCP_NODELAY``: asyncio only turns Nagle's
    algorithm off on accepted connections whose socket says ``IPPROTO_TCP``, and with it on, a
    response written in pieces (head then body, or SSE events) waits for the client's delayed ACK
    (about 40 ms on Linux) on every request.

    Raises:
        OSError: the address cannot be bound.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def serve(app: object, sock: socket.socket, log_level: str, proxy: ProxyConfig | None = None) -> None:
    """Run ``app`` under uvicorn on an already bound socket (uvicorn's own access log off: the
    proxy writes its own; the upstream's ``server``/``date`` headers; open streams given
    ``graceful_shutdown`` seconds to finish on SIGTERM; request heads bounded by ``max_header_bytes``)."""
    proxy = proxy or ProxyConfig()
    config = uvicorn.Config(
        app,  # type: ignore[arg-type]
        log_config=None,
        log_level=log_level,
        access_log=False,
        server_header=False,
        date_header=False,
        # seconds as a float (0: cut at once); uvicorn annotates an int, asyncio.wait_for takes any number
        timeout_graceful_shutdown=cast(int, proxy.graceful_shutdown),
        http="h11",  # the request-head bound is h11's (httptools, when installed, has none to set)
        h11_max_incomplete_event_size=proxy.max_header_bytes,
        lifespan="on",
    )
    uvicorn.Server(config).run(sockets=[sock])


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``mcp-normalizer`` and ``python -m proxy``; returns the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "check":
        from .check import main as check

        return check(args[1:])
    if args and args[0] == "demo":
        from .demo import run_demo

        demo = _demo_parser().parse_args(args[1:])
        return run_demo(
            host=demo.host,
            port=demo.port,
            upstream_port=demo.upstream_port,
            response_mode=demo.response_mode,
            once=demo.once,
        )
    ns = _proxy_parser().parse_args(args)
    try:
        settings = Settings.from_env(
            upstream=ns.upstream,
            host=ns.host,
            port=ns.port,
            config_file=ns.config_file,
            report_only=ns.report_only,
            log_level=ns.log_level,
        )
        config = settings.load_config()
    except ConfigError as exc:
        return _fail(str(exc))
    try:
        sock = bind(settings.host, settings.port)
    except OSError as exc:
        return _fail(f"cannot listen on {settings.host}:{settings.port}: {exc.strerror or exc}")
    configure_logging(settings.log_level)
    app = create_app(settings, config=config)
    host, port = sock.getsockname()[:2]
    logging.getLogger("mcp_normalizer").info(
        "listening on http://%s:%s%s, upstream %s%s",
        f"[{host}]" if ":" in host else host,  # an IPv6 address in a URL is bracketed (RFC 3986 3.2.2)
        port,
        settings.mcp_path,
        settings.upstream_label,
        " (report-only)" if config.report_only else "",
    )
    # After its graceful shutdown uvicorn re-raises the signal it caught; SIGTERM is the normal way
    # to stop a service, so it ends the process with 0 (as PID 1 in a container it would anyway).
    signal.signal(signal.SIGTERM, _exit_cleanly)
    try:
        serve(app, sock, settings.log_level, config.proxy)
    except KeyboardInterrupt:
        return 130  # Ctrl-C: uvicorn already shut down gracefully; no traceback
    return 0
