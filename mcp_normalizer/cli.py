"""The ``mcp-normalizer`` command.

::

    mcp-normalizer --upstream URL [--host 127.0.0.1] [--port 8765] [--config FILE]
                   [--report-only] [--log-level LEVEL]
    mcp-normalizer [--upstream-cwd DIR] [--upstream-env NAME[=VALUE] ...] [flags as above] -- CMD [ARGS...]
                   (or --upstream-cmd 'CMD ARGS...': a stdio server, served on /mcp)
    mcp-normalizer stdio [--config FILE] [--log-file FILE] [--cwd DIR] [--env NAME[=VALUE] ...] -- CMD [ARGS...]
    mcp-normalizer demo [--port 8765] [--upstream-port 8766] [--response-mode sse|json] [--once]
    mcp-normalizer check URL [--header 'Name: value' ...] [--call TOOL '{json args}' ...] [--calls FILE]
                             [--format table|json] [--config FILE]     (see mcp_normalizer.check.command)
    mcp-normalizer check --capture FILE [--format table|json] [--config FILE]

Every flag of the first form can also come from ``MCP_NORMALIZER_<FLAG>`` (flags win). A bad flag,
an unreadable config file or an invalid rule prints one line naming the problem and exits with 2
before anything listens.
"""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import signal
import socket
import sys
from collections.abc import Sequence
from dataclasses import replace
from types import FrameType
from typing import TYPE_CHECKING, cast

from .arguments import Parser
from .config import LOG_LEVELS, NormalizerConfig, Settings, env_items, rule_config
from .errors import ConfigError
from .ops.logs import configure_logging
from .wire.hosts import is_loopback

if TYPE_CHECKING:
    pass


def _proxy_parser() -> Parser:
    parser = Parser(
        prog="mcp-normalizer",
        description="Normalizing reverse proxy for MCP servers (Streamable HTTP). Subcommands: stdio, demo, check.",
    )
    parser.add_argument("--upstream", help="upstream MCP endpoint URL (env MCP_NORMALIZER_UPSTREAM)")
    parser.add_argument(
        "--upstream-cmd",
        help="a stdio MCP server to start and serve on /mcp, as a shell-quoted command line; or give its argv"
        " after -- (env MCP_NORMALIZER_UPSTREAM_CMD)",
    )
    parser.add_argument("--upstream-cwd", help="that server's working directory (env MCP_NORMALIZER_UPSTREAM_CWD)")
    parser.add_argument(
        "--upstream-env",
        action="append",
        metavar="NAME[=VALUE]",
        help="a variable for that server, or NAME alone to pass the proxy's through (repeatable; env"
        " MCP_NORMALIZER_UPSTREAM_ENV: a JSON object, one item per line, or comma-separated); the server gets the"
        " proxy's environment less its MCP_NORMALIZER_* and OTEL_* variables",
    )
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
        "--workers",
        type=int,
        help="processes serving the port, each with its own state (default 1; env MCP_NORMALIZER_WORKERS)",
    )
    parser.add_argument(
        "--state-dir",
        help="keep what results taught of their tools' schemas in this directory, across restarts"
        " (default: memory only; env MCP_NORMALIZER_STATE_DIR)",
    )
    parser.add_argument(
        "--http", choices=("httptools", "h11"), help="HTTP/1.1 parser (default httptools; env MCP_NORMALIZER_HTTP)"
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
    parser.add_argument("--host", default="127.0.0.1", help="interface to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8765, help="proxy port (default 8765)")
    parser.add_argument("--upstream-port", type=int, default=8766, help="legacy upstream port (default 8766)")
    parser.add_argument("--response-mode", choices=("sse", "json"), default="sse", help="how the upstream answers")
    parser.add_argument("--once", action="store_true", help="print the comparison and exit instead of serving")
    return parser


def _stdio_parser() -> Parser:
    parser = Parser(
        prog="mcp-normalizer stdio",
        usage="mcp-normalizer stdio [--config FILE] [--report-only] [--log-level LEVEL] [--log-file FILE]"
        " [--cwd DIR] [--env NAME[=VALUE] ...] -- CMD [ARGS...]",
        description="Start a stdio MCP server and relay its messages, repaired, on this process's stdin and "
        "stdout (for a host's config file). The log goes to stderr, or to --log-file.",
    )
    parser.add_argument("--config", dest="config_file", help="TOML rule file (env MCP_NORMALIZER_CONFIG)")
    parser.add_argument("--report-only", action="store_true", help="log every rewrite, change nothing")
    parser.add_argument("--log-level", type=str.lower, help="critical, error, warning, info or debug (default info)")
    parser.add_argument("--log-file", help="append the log to this file instead of stderr")
    parser.add_argument("--cwd", help="the server's working directory (default: this one)")
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME[=VALUE]",
        help="a variable for the server, or NAME alone to pass this one's through (repeatable); the server gets"
        " this process's environment less its own MCP_NORMALIZER_* and OTEL_* variables",
    )
    return parser


def _stdio(args: list[str]) -> int:
    """The ``stdio`` subcommand: its flags before ``--``, the server's argv after."""
    cut = args.index("--") if "--" in args else len(args)
    ns = _stdio_parser().parse_args(args[:cut])
    command = args[cut + 1 :]
    try:
        env_file = os.environ.get("MCP_NORMALIZER_CONFIG")
        config = rule_config(ns.config_file or env_file or None)
        if ns.report_only:
            config = replace(config, report_only=True)
        level = ns.log_level or os.environ.get("MCP_NORMALIZER_LOG_LEVEL", "info").lower()
        if level not in LOG_LEVELS:
            raise ConfigError(f"log level {level!r} must be one of {', '.join(LOG_LEVELS)}")
        try:
            extra, passed = env_items(ns.env)
        except ValueError as exc:
            raise ConfigError(f"--env takes NAME=VALUE or NAME: {exc}") from None
        if ns.cwd is not None and not os.path.isdir(ns.cwd):
            raise ConfigError(f"--cwd {ns.cwd!r} is not a directory")
    except ConfigError as exc:
        return _fail(str(exc))
    try:
        configure_logging(level, ns.log_file, process=True)
    except OSError as exc:
        return _fail(f"cannot open the log file {ns.log_file!r}: {exc.strerror or exc}")
    from .hop.child import reap_orphans, server_env
    from .hop.stdio_wrapper import run_stdio

    reap_orphans()  # as a container's PID 1 (docker run -i IMAGE stdio -- CMD), no helper stays a zombie

    env = server_env(extra, passed)  # never the proxy's own variables, nor an LC_CTYPE the host did not send

    return run_stdio(command, config, env=env, cwd=ns.cwd)


def _exit_cleanly(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)


def _fail(message: str) -> int:
    print(f"mcp-normalizer: error: {message}", file=sys.stderr)
    return 2


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``mcp-normalizer`` and ``python -m mcp_normalizer``; returns the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "check":
        from .check import main as check

        return check(args[1:])
    if args and args[0] == "stdio":
        return _stdio(args[1:])
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
    cut = args.index("--") if "--" in args else len(args)
    ns = _proxy_parser().parse_args(args[:cut])
    if cut < len(args):
        if ns.upstream_cmd is not None or not args[cut + 1 :]:
            return _fail("give the stdio server either as --upstream-cmd 'CMD ARGS' or after --, once")
        ns.upstream_cmd = shlex.join(args[cut + 1 :])
    # Ctrl-C from now on ends the proxy with 130, also in a process started with SIGINT ignored
    # (nohup, background jobs) and also before uvicorn has installed its own handler.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return _main(ns)
    except KeyboardInterrupt:
        return 130


def _main(ns: argparse.Namespace) -> int:
    try:
        settings = Settings.from_env(
            upstream=ns.upstream,
            host=ns.host,
            port=ns.port,
            config_file=ns.config_file,
            report_only=ns.report_only,
            log_level=ns.log_level,
        )
        overrides = {
            "workers": ns.workers,
            "http": ns.http,
            "state_dir": ns.state_dir,
            "upstream_cmd": ns.upstream_cmd,
            "upstream_cwd": ns.upstream_cwd,
            "upstream_env": tuple(ns.upstream_env) if ns.upstream_env else None,
        }
        config = settings.load_config({k: v for k, v in overrides.items() if v is not None})
    except ConfigError as exc:
        return _fail(str(exc))
    configure_logging(settings.log_level, process=True)
    from .hop.server import bind, serve_workers

    # After its graceful shutdown uvicorn re-raises the signal it caught; SIGTERM is the normal way
    # to stop a service, so it ends the process with 0 (as PID 1 in a container it would anyway).
    signal.signal(signal.SIGTERM, _exit_cleanly)
    workers = config.proxy.workers
    try:
        if workers > 1:
            return serve_workers(workers, lambda sock: _run(settings, config, sock), settings.host, settings.port)
        sock = bind(settings.host, settings.port)
    except OSError as exc:
        return _fail(f"cannot listen on {settings.host}:{settings.port}: {exc.strerror or exc}")
    return _run(settings, config, sock)


def _run(settings: Settings, config: NormalizerConfig, sock: socket.socket) -> int:
    """Serve the proxy on ``sock`` (in this process); the exit code."""
    from .app import create_app
    from .hop.child import reap_orphans
    from .hop.server import HttpParser, serve, uvicorn_config

    signal.signal(signal.SIGTERM, _exit_cleanly)
    reap_orphans()  # as a container's PID 1 with no init: what a stdio server leaves behind is reaped
    try:
        app = create_app(settings, config=config)
    except ConfigError as exc:  # OTEL_* ask for traces that cannot be sent
        return _fail(str(exc))
    host, port = sock.getsockname()[:2]
    logging.getLogger("mcp_normalizer").info(
        "listening on http://%s:%s%s, upstream %s%s",
        f"[{host}]" if ":" in host else host,  # an IPv6 address in a URL is bracketed (RFC 3986 3.2.2)
        port,
        settings.mcp_path,
        settings.upstream_label or f"stdio: {config.proxy.upstream_cmd}",
        " (report-only)" if config.report_only else "",
    )
    proxy = config.proxy
    if not is_loopback(host) and not (proxy.allowed_hosts and proxy.allowed_origins):
        lists = (("Host", proxy.allowed_hosts), ("Origin", proxy.allowed_origins))
        unchecked = " and ".join(name for name, patterns in lists if not patterns)
        logging.getLogger("mcp_normalizer").warning(
            "listening on a non-loopback address with no allow-list: %s not checked (DNS-rebinding protection off,"
            " as in the MCP SDKs); set allowed_hosts / allowed_origins (MCP_NORMALIZER_ALLOWED_HOSTS,"
            " MCP_NORMALIZER_ALLOWED_ORIGINS) to the names clients dial",
            unchecked,
        )
    try:
        return serve(
            uvicorn_config(
                app, proxy, log_level=settings.log_level, parser=cast(HttpParser, proxy.http), refusals=app.refusals
            ),
            [sock],
        )
    except SystemExit as exc:  # SIGTERM
        return int(exc.code or 0)
