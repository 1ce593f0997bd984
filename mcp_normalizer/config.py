"""Settings: the rule file (TOML), the process settings (CLI flags and ``MCP_NORMALIZER_*`` variables).

Everything is validated when loaded, so a bad value stops the process before it listens, with one
:class:`~mcp_normalizer.errors.ConfigError` naming the problem. The rule file format::

    [normalizer]
    problem_meta_key = "org.htcom.protean/problem"   # _meta key of the RFC 9457 problem
    report_only = false          # log what would be rewritten, change nothing
    mirror_max_bytes = 65536     # largest structuredContent the text mirror copies
    max_validate_bytes = 4194304 # larger tools/call results pass on unread (logged)
    fetch_tools_list = true      # fetch tools/list when a call names an unknown tool
    fetch_timeout = 10.0         # seconds
    model_api = ""               # the model API family of clients whose host does not say

    [clients."cursor-vscode"]    # per clientInfo.name
    model_api = "gemini"
    degrade = false              # degrade, don't fail: every tool without outputSchema/structuredContent
    degrade_clients = []         # the same for these clients only (clientInfo names or host profiles)

    [rules]                      # per rule: "on" | "off" | "report"
    text_mirror = "on"

    [tools."protean.list_runtimes"]
    nullable = ["/runtimes/*/scope"]   # JSON pointers into structuredContent, * = any item
    relax = ["/raw/object"]            # places whose values may be anything
    drop_output_schema = false         # advertise the tool without its outputSchema
    degrade = true                     # degrade mode for this tool (false: never, whatever the rest says)
    rules = { text_mirror = "off" }    # per-tool rule modes
    model_api = "gemini"               # the model API family this tool goes to, for every client
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import shutil
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from importlib import resources
from typing import Any
from urllib.parse import urlsplit

from .engine.rules import RULES_BY_NAME, Mode, RuleSettings
from .engine.rules.base import is_meta_key
from .engine.rules.clients import ClientProfile, resolve_model_api
from .engine.rules.host_profiles import MODEL_APIS
from .errors import ConfigError
from .keys import KEY, Key, documented, from_env, only, pointers, read, setting, spec
from .wire.forwarded import parse_networks
from .wire.hosts import host_pattern_problem, origin_pattern_problem
from .wire.pointer import PointerPattern

#: The log levels a setting or flag may name.
LOG_LEVELS = ("critical", "error", "warning", "info", "debug")
_LOG_LEVELS = LOG_LEVELS
#: The most worker processes one proxy starts (each is a whole proxy: 100,000 would exhaust the host).
MAX_WORKERS = 256
#: The values of ``[proxy] upstream_era``: learned, the stateless era only, or never bridged.
UPSTREAM_ERAS = ("auto", "2026-07-28", "legacy")


def _unwritable(path: str) -> str | None:
    """Why the capture cannot append to ``path`` (checked without opening it: a FIFO would block),
    ``None`` when it can."""
    target = os.path.abspath(path)
    if os.path.isdir(target):
        return "is a directory"
    if os.path.exists(target):
        return None if os.access(target, os.W_OK) else "is not writable"
    parent = os.path.dirname(target)
    if not os.path.isdir(parent):
        return "is in a folder that does not exist"
    return None if os.access(parent, os.W_OK | os.X_OK) else "cannot be created (its folder is not writable)"


def _unusable_dir(path: str) -> str | None:
    """Why ``path`` cannot be the state directory (it is made ``0700`` when missing and its parent
    is writable), ``None`` when it can."""
    target = os.path.abspath(path)
    if os.path.exists(target) and not os.path.isdir(target):
        return "is not a directory"
    if not os.path.isdir(target):
        try:
            os.makedirs(target, mode=0o700, exist_ok=True)
        except OSError as exc:
            return f"cannot be created ({exc.strerror or exc})"
    return None if os.access(target, os.W_OK | os.X_OK) else "is not writable"


_DEFAULTS = RuleSettings()


@dataclass(frozen=True, slots=True)
class ToolConfig:
    """Per-tool declarations.

    Attributes:
        nullable: places in ``structuredContent`` declared nullable.
        relax: places whose values may be anything (the advertised schema says nothing there).
        drop_output_schema: advertise the tool without its ``outputSchema``.
        degrade: degrade mode for this tool (rule ``degrade``): ``True`` on for every client,
            ``False`` off for every client, ``None`` as the global settings say.
        rules: rule modes for this tool, overriding the global ones.
        model_api: the model API family this tool goes to, whichever client lists it (over the
            client's and its host's; ``""``: theirs).
    """

    nullable: tuple[PointerPattern, ...] = ()
    relax: tuple[PointerPattern, ...] = ()
    drop_output_schema: bool = False
    degrade: bool | None = None
    rules: Mapping[str, Mode] = field(default_factory=dict)
    model_api: str = ""


def model_api_family(value: object, where: str) -> str:
    """``value`` as a ``model_api`` setting: ``""`` (none) or a family of ``hosts.toml``.

    Raises:
        ConfigError: another value.
    """
    if isinstance(value, str) and (value == "" or value in MODEL_APIS):
        return value
    raise ConfigError(f"{where} model_api must be one of {', '.join(MODEL_APIS)} (or empty), not {value!r}")


@documented
@dataclass(frozen=True, slots=True)
class ProxyConfig:
    """How the standalone proxy serves: limits, time limits, security, operations (``[proxy]``).

    Every key can also be set as ``MCP_NORMALIZER_<KEY>`` (upper case; lists comma-separated),
    which wins over the file.
    """

    max_request_bytes: int = setting(16 * 1024 * 1024, "largest request body relayed; a larger one gets 413.")
    max_rewrite_bytes: int = setting(
        16 * 1024 * 1024,
        "a JSON response body or an SSE event larger than this is passed through without rewriting (logged).",
    )
    connect_timeout: float = setting(5.0, "seconds to connect to the upstream (then 504).", exclusive=True)
    first_byte_timeout: float = setting(
        300.0,
        "seconds from sending a request to the upstream's response headers (504).",
        exclusive=True,
    )
    idle_timeout: float = setting(
        300.0,
        "seconds a response body may stay silent, from its head to the first byte and between any two "
        "chunks (SSE keep-alive comments count); 0 disables. The stream is then broken off.",
    )
    send_timeout: float = setting(
        60.0,
        "seconds a client may take to accept one chunk of a response (a client that stopped reading); 0 "
        "disables. Its connection is then closed, and the upstream's.",
    )
    allowed_hosts: tuple[str, ...] = setting(
        (),
        "``Host`` patterns accepted (``name``, ``name:port``, ``name:*``, ``*``); a request with another "
        "gets 421. Empty: loopback hosts on a loopback listener, any elsewhere "
        "(:mod:`mcp_normalizer.wire.hosts`).",
    )
    allowed_origins: tuple[str, ...] = setting(
        (),
        "``Origin`` patterns accepted; a request with another gets 403. Empty: loopback origins on a "
        "loopback listener, any elsewhere.",
    )
    admin_prefix: str = setting(
        "/.mcp-normalizer",
        "path prefix of the proxy's own endpoints (``livez``, ``readyz``, ``metrics``).",
    )
    access_log: bool = setting(False, "log one JSON line per request.")
    refusal_log_interval: float = setting(
        60.0,
        "seconds between two log lines of one refusal cause from one peer (the others are counted in "
        "``mcp_normalizer_refusals_total`` and in the next line's ``suppressed``); 0 logs every refusal.",
    )
    graceful_shutdown: float = setting(10.0, "seconds open streams get to finish on SIGTERM.")
    max_header_bytes: int = setting(
        16 * 1024,
        "largest request head (request line and headers) accepted.",
        minimum=1024,
    )
    capture_file: str = setting(
        "",
        "when set, watched requests and the upstream's responses to them are appended to this file (JSON "
        "lines, see :mod:`mcp_normalizer.engine.capture`) for ``mcp-normalizer check --capture``.",
    )
    state_dir: str = setting(
        "",
        "when set, a directory where what results taught of their tools' schemas (rule ``learn_schema``) "
        "is kept across restarts (:mod:`mcp_normalizer.ops.lesson_store`); created if missing. Empty: kept in "
        "memory (and in ``state_url``'s store, when set).",
    )
    head_timeout: float = setting(
        30.0,
        "seconds a connection has to deliver a whole request head (then 408).",
        exclusive=True,
    )
    body_timeout: float = setting(
        30.0,
        "seconds allowed between two reads of a request body (then 408).",
        exclusive=True,
    )
    keep_alive_timeout: float = setting(
        20.0,
        "seconds an idle client connection is kept open for its next request; longer than the clients' "
        "own pools keep one (httpx 5 s, Node 4 s, aiohttp 15 s), so a client never reuses a connection "
        "the proxy is closing.",
        exclusive=True,
    )
    max_connections: int = setting(
        0,
        "open client connections allowed (then 503); 0: a third of the descriptor limit, less 64 "
        "(upstream connections are bounded at twice it).",
    )
    http: str = setting("httptools", "the HTTP/1.1 parser, ``httptools`` (C, the default) or ``h11`` (pure Python).")
    workers: int = setting(
        1,
        "processes serving the port (``SO_REUSEPORT``); more than 1 needs ``state_url``, where they share "
        "what each session established.",
        minimum=1,
    )
    forwarded_headers: bool = setting(
        False,
        "add ``X-Forwarded-For/Proto/Host`` and RFC 7239 ``Forwarded`` to every request "
        "(:mod:`mcp_normalizer.wire.forwarded`).",
    )
    trusted_proxies: tuple[str, ...] = setting(
        (),
        "addresses or networks of proxies in front of this one, whose forwarding headers are kept "
        "(everyone else's are dropped).",
    )
    public_url: str = setting(
        "",
        "the origin clients dial (``https://mcp.example.com``); the upstream's OAuth metadata URLs are "
        "moved to it (:mod:`mcp_normalizer.wire.public`). Empty: nothing is rewritten.",
    )
    state_url: str = setting(
        "",
        "a Redis the replicas behind one load balancer share their scope state in (``redis://``, "
        "``rediss://`` or ``unix://``; :mod:`mcp_normalizer.ops.shared_state`). Empty: each process keeps its own.",
    )
    state_secret: str = setting(
        "",
        "the key the scopes' names in that store are hashed with (the same on every replica); empty: unkeyed.",
    )
    state_scopes_per_client: int = setting(
        1000,
        "new scopes one client address may write to that store per minute, per replica (past it they "
        "stay in the replica's memory); 0: no bound. Behind a load balancer, list it in "
        "``trusted_proxies`` so that clients are told apart.",
    )

    upstream_era: str = setting(
        "auto",
        "the protocol era the upstream speaks (an HTTP upstream, or the server ``mcp-normalizer stdio`` starts): "
        "``auto`` (learned: an upstream that refuses a legacy "
        "client's ``initialize`` and answers ``server/discover`` is bridged for legacy clients), ``2026-07-28`` "
        "(it speaks only the stateless era: every legacy client is bridged, nothing probed) or ``legacy`` "
        "(never bridged; each client's era passes through as negotiated). "
        "(:mod:`mcp_normalizer.engine.era_bridge`)",
    )
    max_bridged_sessions: int = setting(
        10_000,
        "sessions the proxy keeps for legacy clients of a 2026-07-28 upstream; a new one past it ends the "
        "longest-idle one (its client then gets 404 and initializes again).",
        minimum=1,
    )
    bridged_session_idle_timeout: float = setting(
        3600.0,
        "seconds a bridged session may stay idle (nothing in flight, no GET stream) before it ends; 0: never.",
    )
    serve_modern_hosts: bool = setting(
        False,
        "consent to answer a 2026-07-28 client's ``server/discover`` and stateless requests for a legacy "
        "upstream that does not speak them, over a session the proxy keeps per client and authorization "
        "(the upstream sees one legacy session per such client).",
    )
    modern_input_timeout: float = setting(
        300.0,
        "seconds a legacy server's question to a 2026-07-28 client (served with ``serve_modern_hosts``: an "
        "``input_required`` result) waits for the client's retry; then the upstream request is cancelled and "
        "closed. (:mod:`mcp_normalizer.engine.modern_front`)",
        exclusive=True,
    )

    upstream_cmd: str = setting(
        "",
        "a stdio MCP server to start and serve on ``/mcp`` instead of an HTTP ``upstream``: a command line, "
        "shell-quoted (``npx -y @modelcontextprotocol/server-everything``; no shell runs it). One child per "
        "session (:mod:`mcp_normalizer.hop.stdio_upstream`).",
    )
    upstream_env: tuple[str, ...] = setting(
        (),
        "that command's environment beyond the proxy's: ``NAME=VALUE`` sets a variable, ``NAME`` passes the "
        "proxy's own through. The command inherits the proxy's environment less the proxy's own variables "
        "(:data:`OWN_PREFIXES`: ``MCP_NORMALIZER_*``, ``OTEL_*``). In ``MCP_NORMALIZER_UPSTREAM_ENV``: a JSON "
        'object (``{"NAME": "VALUE"}``, ``null`` passes through), one item per line, or comma-separated '
        "``NAME=VALUE`` items (no value with a comma).",
        kind="envlist",
    )
    upstream_cwd: str = setting("", "the working directory of that command (empty: the proxy's).")
    max_children: int = setting(
        64,
        "stdio server processes that may run at once (one per session, and the shared one of stateless "
        "requests); a new session past it ends the longest-idle session's process (that session then gets "
        "404 and initializes again); 503 only when every process is busy.",
    )
    max_children_per_client: int = setting(
        16,
        "stdio server sessions one client (its authorization, else its address) may hold at once; its "
        "new session past it ends its own longest-idle session's process.",
        minimum=1,
    )
    child_idle_timeout: float = setting(
        600.0,
        "seconds a session of a stdio server may stay idle (nothing in flight, no GET stream) before it "
        "ends and its process is stopped; 0: never.",
    )
    max_message_bytes: int = setting(
        32 * 1024 * 1024,
        "the longest line a stdio server may write (one JSON-RPC message); a longer one is dropped as it "
        "comes and the request it answers gets an error.",
    )
    stream_buffer_bytes: int = setting(
        4 * 1024 * 1024,
        "bytes of a stdio server's messages that may wait for one client stream (a POST's answer or a GET "
        "stream), the message being sent counted once; one message larger than this still goes to a client "
        "that reads. Past it the server of a session is no longer read (it blocks on its writes) and a "
        "stateless client's stream is ended with a JSON-RPC error for its requests.",
        minimum=1,
    )
    child_buffer_bytes: int = setting(
        16 * 1024 * 1024,
        "bytes of one stdio server's messages that may wait for its clients, all streams together; past it "
        "as ``stream_buffer_bytes`` (the stateless server's slowest client's stream is ended).",
        minimum=1,
    )
    process_buffer_bytes: int = setting(
        64 * 1024 * 1024,
        "bytes of every stdio server's messages that may wait for clients in the proxy, all together; past "
        "it the stream with the most bytes waiting is ended with a JSON-RPC error for its requests.",
        minimum=1,
    )

    @classmethod
    def from_mapping(cls, table: Mapping[str, Any], where: str) -> ProxyConfig:
        """Build from the ``[proxy]`` table.

        Raises:
            ConfigError: unknown key, wrong type, out-of-range value, bad prefix.
        """
        values = read(table, _PROXY_KEYS, where)
        prefix = values.get("admin_prefix", "/.mcp-normalizer")
        if not prefix.startswith("/") or prefix.endswith("/") or len(prefix) < 2:
            raise ConfigError(f"{where} admin_prefix {prefix!r} must start with '/' and not end with one")
        if values.get("http", "httptools") not in ("httptools", "h11"):
            raise ConfigError(f"{where} http must be 'httptools' or 'h11', not {values['http']!r}")
        try:
            parse_networks(values.get("trusted_proxies", ()))
        except ValueError as exc:
            raise ConfigError(f"{where} trusted_proxies: {exc}") from None
        for key, problem_of in (("allowed_hosts", host_pattern_problem), ("allowed_origins", origin_pattern_problem)):
            for pattern in values.get(key, ()):
                problem = problem_of(pattern)
                if problem is not None:
                    raise ConfigError(f"{where} {key}: {problem}")
        if values.get("upstream_era", "auto") not in UPSTREAM_ERAS:
            raise ConfigError(
                f"{where} upstream_era must be one of {', '.join(UPSTREAM_ERAS)}, not {values['upstream_era']!r}"
            )
        if values.get("workers", 1) > MAX_WORKERS:
            raise ConfigError(f"{where} workers must be at most {MAX_WORKERS}")
        capture = values.get("capture_file", "")
        if capture:
            problem = _unwritable(capture)
            if problem is not None:
                raise ConfigError(f"{where} capture_file {capture!r} {problem}")
        state_dir = values.get("state_dir", "")
        if state_dir:
            problem = _unusable_dir(state_dir)
            if problem is not None:
                raise ConfigError(f"{where} state_dir {state_dir!r} {problem}")
        public = values.get("public_url", "")
        if public:
            parts = urlsplit(public)
            if parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/"):
                raise ConfigError(f"{where} public_url {public!r} must be an http(s) origin: scheme://host[:port]")
            values["public_url"] = f"{parts.scheme}://{parts.netloc}"
        command = values.get("upstream_cmd", "")
        if command:
            try:
                shlex.split(command)
            except ValueError as exc:
                raise ConfigError(f"{where} upstream_cmd {command!r}: {exc}") from None
        try:
            env_items(values.get("upstream_env", ()))
        except ValueError as exc:
            raise ConfigError(f"{where} upstream_env: {exc}") from None
        cwd = values.get("upstream_cwd", "")
        if cwd and not os.path.isdir(cwd):
            raise ConfigError(f"{where} upstream_cwd {cwd!r} is not a directory")
        state_url = values.get("state_url", "")
        if state_url:
            try:
                parts = urlsplit(state_url)
                parts.port  # noqa: B018 - raises on a port out of range
            except ValueError:
                raise ConfigError(f"{where} state_url is not a valid URL (its host or port)") from None
            if parts.scheme not in ("redis", "rediss", "unix"):
                raise ConfigError(f"{where} state_url must be a redis://, rediss:// or unix:// URL")
        return cls(**values)


@documented
@dataclass(frozen=True, slots=True)
class NormalizerConfig:
    """The rule configuration shared by the middleware and the proxy.

    The keys of ``[normalizer]`` are the settings below and those of
    :class:`~mcp_normalizer.engine.rules.base.RuleSettings` (``problem_meta_key``, ``mirror_max_bytes``).

    Attributes:
        rules: global rule modes by rule name (rules not named run in their default mode).
        tools: per-tool declarations by tool name.
        clients: the model API family named per client, by ``clientInfo.name`` (``[clients."NAME"]
            model_api``): over the host's own and over ``model_api``.
        settings: knobs the rules read (problem key, mirror size).
        proxy: how the standalone proxy serves (``[proxy]``).
    """

    rules: Mapping[str, Mode] = field(default_factory=dict)
    tools: Mapping[str, ToolConfig] = field(default_factory=dict)
    settings: RuleSettings = field(default_factory=RuleSettings)
    proxy: ProxyConfig = field(default_factory=ProxyConfig)
    report_only: bool = setting(False, "log every rewrite, change no byte.")
    max_validate_bytes: int = setting(
        4 * 1024 * 1024,
        "``tools/call`` results larger than this pass on unread (not validated, not repaired; "
        "streamed when the upstream sends a ``content-length``).",
    )
    interventions: bool = setting(
        True,
        "apply the table of known servers' declarations (``mcp_normalizer/interventions.toml``) besides "
        "the rule file's.",
    )
    fetch_tools_list: bool = setting(True, "fetch ``tools/list`` from the upstream when a call names an unknown tool.")
    fetch_timeout: float = setting(10.0, "seconds allowed for that fetch (all pages).", exclusive=True)
    path: str | None = setting(
        None, "the MCP endpoint path the middleware watches; ``None`` watches every path.", kind="str"
    )
    max_scopes: int = setting(10_000, "how many sessions/authorizations to remember tool catalogs for.")
    max_catalog_bytes: int = setting(
        256 * 1024 * 1024,
        "bytes the distinct tool catalogs may hold (scopes listing the same tools share one); least "
        "recently used scopes are forgotten past it.",
    )
    max_pending: int = setting(1_000, "unanswered ``tools/call`` requests remembered per legacy session (resumption).")
    pending_ttl: float = setting(600.0, "seconds such a request is remembered.")
    model_api: str = setting(
        "",
        "the model API family (``anthropic``, ``openai``, ``openai-strict``, ``gemini``) of the clients whose "
        "host does not name one (a host that lets the user pick the model, an unknown client): they get that "
        "family's repairs, as its hosts do. Empty: none (only the repairs every client gets). "
        '``[clients."NAME"]`` and ``[tools."NAME"]`` name one per client and per tool.',
    )
    #: Per-client settings by ``clientInfo.name`` (``[clients."NAME"]``): ``model_api``.
    clients: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        model_api_family(self.model_api, "[normalizer]")

    def for_client(self, profile: ClientProfile) -> ClientProfile:
        """``profile`` with the model API family the settings give it
        (:func:`~mcp_normalizer.engine.rules.clients.resolve_model_api`)."""
        if not self.model_api and not self.clients:
            return profile
        return resolve_model_api(profile, self.model_api, self.clients)

    degrade: bool = setting(
        False,
        "degrade, don't fail (rule ``degrade``, lossy): every tool is advertised without its ``outputSchema`` "
        "and its results reach the client without ``structuredContent`` (both kept in ``_meta``, the value's "
        'JSON added to ``content``). Per tool: ``[tools."X"] degrade``.',
    )
    degrade_clients: tuple[str, ...] = setting(
        (),
        "the same as ``degrade``, for these clients only: ``clientInfo`` names (``claude-ai``) or host "
        "profiles (``claude-desktop``: every name of that host).",
    )

    def with_proxy(self, changes: Mapping[str, Any], where: str = "command line:") -> NormalizerConfig:
        """This config with ``[proxy]`` keys changed (the environment over the file, flags over both),
        checked as the file's are.

        Raises:
            ConfigError: an unknown key or a value out of range (named after ``where``).
        """
        if not changes:
            return self
        table = {key: list(v) if isinstance(v, tuple) else v for key, v in self.proxy_table().items()}
        table.update({key: list(v) if isinstance(v, tuple) else v for key, v in changes.items()})
        return dataclasses.replace(self, proxy=ProxyConfig.from_mapping(table, where))

    def proxy_table(self) -> dict[str, Any]:
        """The ``[proxy]`` keys and values of this config."""
        return {f.name: getattr(self.proxy, f.name) for f in dataclasses.fields(ProxyConfig)}

    def mode(self, rule: str, tool: str | None) -> Mode:
        """The mode rule ``rule`` runs in for tool ``tool``."""
        base = RULES_BY_NAME[rule].default
        mode = self.rules.get(rule, base)
        if tool is not None and tool in self.tools:
            mode = self.tools[tool].rules.get(rule, mode)
        if self.report_only and mode is Mode.ON:
            return Mode.REPORT
        return mode

    def degrade_for(self, tool: str | None, client: str | None, profile: str | None = None) -> str:
        """Why degrade mode is on for ``tool`` and a client named ``client`` (its ``clientInfo`` name)
        of host profile ``profile``, ``""`` when it is off: the tool's own ``degrade`` first, then the
        global one, then ``degrade_clients``."""
        declared = self.tool(tool).degrade
        if declared is not None:
            return f"degrade mode: declared for tool {tool!r} in config" if declared else ""
        if self.degrade:
            return "degrade mode: declared for every tool in config"
        names = self.degrade_clients
        if client is not None and client in names:
            return f"degrade mode: declared for client {client!r} in config"
        if profile is not None and profile in names:
            return f"degrade mode: declared for host {profile!r} in config"
        return ""

    def tool(self, name: str | None) -> ToolConfig:
        """The declarations for tool ``name`` (empty ones when the config names none)."""
        found = self.tools.get(name) if name is not None else None
        return found if found is not None else _NO_TOOL

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], *, source: str = "config") -> NormalizerConfig:
        """Build a config from the decoded rule file.

        Raises:
            ConfigError: unknown section, key or rule, bad mode, bad pointer, bad ``_meta`` key.
        """
        only(data, {"normalizer", "rules", "tools", "proxy", "clients"}, source)
        values = read(_table(data, "normalizer", source), _NORMALIZER_KEYS, f"{source} [normalizer]")
        problem_key = _meta_key(
            values.pop("problem_meta_key", _DEFAULTS.problem_meta_key), f"{source}: [normalizer] problem_meta_key"
        )
        mirror = values.pop("mirror_max_bytes", _DEFAULTS.mirror_max_bytes)
        for client in values.get("degrade_clients", ()):
            if not client.strip():
                raise ConfigError(f"{source}: [normalizer] degrade_clients: a name must not be empty")
        tools: dict[str, ToolConfig] = {}
        for name, table in _table(data, "tools", source).items():
            where = f"{source} [tools.{name!r}]"
            if not isinstance(table, Mapping):
                raise ConfigError(f"{where} must be a table")
            only(table, {"nullable", "relax", "drop_output_schema", "degrade", "rules", "model_api"}, where)
            drop = table.get("drop_output_schema", False)
            if not isinstance(drop, bool):
                raise ConfigError(f"{where} drop_output_schema must be true or false")
            degrade = table.get("degrade")
            if degrade is not None and not isinstance(degrade, bool):
                raise ConfigError(f"{where} degrade must be true or false")
            tools[str(name)] = ToolConfig(
                nullable=pointers(table, "nullable", where),
                relax=pointers(table, "relax", where),
                drop_output_schema=drop,
                degrade=degrade,
                rules=_modes(table.get("rules", {}), f"{where} rules"),
                model_api=model_api_family(table.get("model_api", ""), where),
            )
        clients: dict[str, str] = {}
        for name, table in _table(data, "clients", source).items():
            where = f"{source} [clients.{name!r}]"
            if not isinstance(table, Mapping):
                raise ConfigError(f"{where} must be a table")
            only(table, {"model_api"}, where)
            family = model_api_family(table.get("model_api", ""), where)
            if family:
                clients[str(name)] = family
        return cls(
            rules=_modes(_table(data, "rules", source), f"{source} [rules]"),
            tools=tools,
            clients=clients,
            settings=RuleSettings(problem_meta_key=problem_key, mirror_max_bytes=mirror),
            proxy=ProxyConfig.from_mapping(_table(data, "proxy", source), f"{source} [proxy]"),
            **values,
        )

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> NormalizerConfig:
        """Load a TOML rule file.

        Raises:
            ConfigError: the file cannot be read, is not TOML, or is invalid.
        """
        try:
            with open(path, "rb") as fh:
                data = tomllib.load(fh)
        except OSError as exc:
            raise ConfigError(f"cannot read config file {str(path)!r}: {exc.strerror or exc}") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {str(path)!r} is not valid TOML: {exc}") from None
        except UnicodeDecodeError:
            raise ConfigError(f"config file {str(path)!r} is not UTF-8 text") from None
        return cls.from_mapping(data, source=str(path))

    @classmethod
    def shipped(cls) -> NormalizerConfig:
        """The default rule file shipped with the package (``config/normalizer.toml``)."""
        text = resources.files("mcp_normalizer").joinpath("normalizer.toml").read_text(encoding="utf-8")
        return cls.from_mapping(tomllib.loads(text), source="shipped config/normalizer.toml")


_PROXY_KEYS = spec(ProxyConfig)
_RULE_SETTINGS_KEYS = spec(RuleSettings)
_NORMALIZER_KEYS = {**_RULE_SETTINGS_KEYS, **spec(NormalizerConfig)}
#: The ``[normalizer]`` keys a ``MCP_NORMALIZER_<KEY>`` variable sets (``path`` is the upstream
#: URL's; ``report_only`` is also a process setting, read there).
_NORMALIZER_ENV_KEYS = {
    name: key for name, key in spec(NormalizerConfig).items() if name not in ("path", "report_only")
}


_NO_TOOL = ToolConfig()


def _meta_key(key: str, where: str) -> str:
    """``key``, a ``problem_meta_key`` value, from ``where`` (a rule file's key, a variable).

    Raises:
        ConfigError: it is not a valid ``_meta`` key.
    """
    if not is_meta_key(key):
        raise ConfigError(f"{where} {key!r} is not a valid _meta key")
    return key


def _table(data: Mapping[str, Any], name: str, source: str) -> Mapping[str, Any]:
    table = data.get(name, {})
    if not isinstance(table, Mapping):
        raise ConfigError(f"{source}: [{name}] must be a table")
    return table


def _modes(table: object, where: str) -> dict[str, Mode]:
    if not isinstance(table, Mapping):
        raise ConfigError(f"{where} must be a table of rule = mode")
    modes: dict[str, Mode] = {}
    for rule, mode in table.items():
        if rule not in RULES_BY_NAME:
            raise ConfigError(f"{where}: unknown rule {rule!r} (known: {', '.join(RULES_BY_NAME)})")
        try:
            modes[rule] = Mode(mode)
        except ValueError:
            raise ConfigError(f"{where}: rule {rule!r} mode must be one of on, off, report, not {mode!r}") from None
    return modes


@documented
@dataclass(frozen=True, slots=True)
class Settings:
    """Process settings of the standalone proxy (CLI flags, or the ``MCP_NORMALIZER_*`` variables
    named after them; ``config_file`` is ``MCP_NORMALIZER_CONFIG``). ``environ`` is where the
    variables are read, also the ``[proxy]`` keys' (``None``: the process environment).
    """

    upstream: str = field(
        default="",
        metadata={
            KEY: Key(
                "str",
                "the upstream MCP endpoint URL (``http`` or ``https``); the proxy serves the MCP "
                "endpoint at the same path. Empty when ``[proxy] upstream_cmd`` names a stdio server.",
            )
        },
    )
    host: str = setting("127.0.0.1", "interface to listen on.")
    port: int = setting(8765, "TCP port to listen on.")
    config_file: str | None = setting(
        None, "a TOML rule file replacing the shipped one, or ``None``.", kind="str", env="MCP_NORMALIZER_CONFIG"
    )
    report_only: bool = setting(False, "log rewrites, change nothing (overrides the rule file).")
    log_level: str = setting("info", "``critical``, ``error``, ``warning``, ``info`` or ``debug``.")
    environ: Mapping[str, str] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.upstream:
            self._check_upstream()
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"port {self.port} is out of range 0-65535")
        if self.log_level not in _LOG_LEVELS:
            raise ConfigError(f"log level {self.log_level!r} must be one of {', '.join(_LOG_LEVELS)}")

    def _check_upstream(self) -> None:
        parts = urlsplit(self.upstream)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"upstream {self.upstream!r} must be an http:// or https:// URL with a host")
        try:
            parts.port  # noqa: B018 - raises on a bad port
        except ValueError:
            raise ConfigError(f"upstream {redact_url(self.upstream)!r} has an invalid port") from None
        if parts.username is not None or parts.password is not None:
            # They would have to become a Basic Authorization header on every request, silently
            # replacing the one each client sends: refused, never guessed at.
            raise ConfigError(
                f"upstream {redact_url(self.upstream)!r} carries credentials (user:password@); the proxy "
                "sends each client's own Authorization header, put credentials there"
            )

    @property
    def upstream_label(self) -> str:
        """The upstream URL as logs may show it: query values replaced by ``***`` (:func:`redact_url`)."""
        return redact_url(self.upstream)

    @property
    def mcp_path(self) -> str:
        """The path of the MCP endpoint (the upstream URL's path, ``/`` if empty; ``/mcp`` for a
        stdio upstream)."""
        if not self.upstream:
            return "/mcp"
        return urlsplit(self.upstream).path or "/"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Read ``MCP_NORMALIZER_UPSTREAM``, ``_HOST``, ``_PORT``, ``_CONFIG``, ``_REPORT_ONLY``,
        ``_LOG_LEVEL``; keyword ``overrides`` that are not ``None`` win.

        Raises:
            ConfigError: a value is missing or invalid.
        """
        env = os.environ if environ is None else environ
        flags = frozenset(name for name, value in overrides.items() if value is not None)
        values = from_env(env, _SETTINGS_KEYS, skip=flags)  # a flag wins, even over a variable that would not parse
        if "log_level" in values:
            values["log_level"] = values["log_level"].lower()
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values, environ=environ)

    def load_config(self, flags: Mapping[str, Any] | None = None) -> NormalizerConfig:
        """The rule config these settings select, with ``[proxy]`` keys changed by ``flags``,
        the MCP path and the report-only flag applied.

        Raises:
            ConfigError: the rule file cannot be read or is invalid; there is no upstream (neither
                ``upstream`` nor ``[proxy] upstream_cmd``), or there are both; ``workers`` above 1
                without ``state_url``.
        """
        config = rule_config(self.config_file, self.environ).with_proxy(dict(flags or {}))
        command = config.proxy.upstream_cmd
        if not self.upstream and not command:
            raise ConfigError(
                "no upstream: pass --upstream URL (or set MCP_NORMALIZER_UPSTREAM), or a stdio server with "
                "--upstream-cmd CMD or -- CMD ARGS... (MCP_NORMALIZER_UPSTREAM_CMD, [proxy] upstream_cmd)"
            )
        if self.upstream and command:
            raise ConfigError("both an upstream URL and an upstream command: pass one of them")
        if command and config.proxy.workers > 1:
            raise ConfigError("workers must be 1 with upstream_cmd: a session's server process lives in one worker")
        if command:
            problem = _command_problem(config.proxy)
            if problem is not None:
                raise ConfigError(f"upstream_cmd: {problem}")
        if config.proxy.workers > 1 and not config.proxy.state_url:
            # Each worker would keep its own sessions: a session's calls, spread over the workers,
            # would see the client's host repairs (and its tasks, its resumable requests) on some
            # calls and not on others.
            raise ConfigError(
                f"workers = {config.proxy.workers} needs state_url: each worker would know only the sessions it "
                "served, so one session's calls would be repaired differently from worker to worker; set "
                "state_url (MCP_NORMALIZER_STATE_URL, [proxy] state_url) to a Redis the workers share, or keep "
                "workers at 1"
            )
        proxy = config.proxy
        base, prefix = self.mcp_path.rstrip("/"), proxy.admin_prefix
        if base and (prefix == base or prefix.startswith(base + "/")):
            # the proxy's own endpoints would hide the MCP endpoint or the upstream's paths below it
            raise ConfigError(f"admin_prefix {prefix!r} is the MCP path {self.mcp_path!r} or under it")
        return replace(config, path=self.mcp_path, report_only=config.report_only or self.report_only, proxy=proxy)


def rule_config(config_file: str | None, environ: Mapping[str, str] | None = None) -> NormalizerConfig:
    """The rule file ``config_file`` (the shipped defaults when ``None``) with the ``[normalizer]``
    and ``[proxy]`` keys of ``MCP_NORMALIZER_*`` variables in ``environ`` (``os.environ`` when
    ``None``) applied.

    Raises:
        ConfigError: the rule file cannot be read or is invalid, or a variable is.
    """
    config = NormalizerConfig.from_file(config_file) if config_file else NormalizerConfig.shipped()
    env = os.environ if environ is None else environ
    config = replace(config, **from_env(env, _NORMALIZER_ENV_KEYS))  # [normalizer] keys, checked the same
    knobs = from_env(env, _RULE_SETTINGS_KEYS)  # the [normalizer] keys rules read
    if "problem_meta_key" in knobs:
        _meta_key(knobs["problem_meta_key"], "environment: MCP_NORMALIZER_PROBLEM_META_KEY")
    if knobs:
        config = replace(config, settings=replace(config.settings, **knobs))
    return config.with_proxy(from_env(env, _PROXY_KEYS), "environment:")


def _command_problem(proxy: ProxyConfig) -> str | None:
    """Why the stdio server ``proxy.upstream_cmd`` cannot be started, found before anything listens
    (its program not found or not executable, looked up as the child's ``PATH`` and working
    directory would), else ``None``."""
    program = shlex.split(proxy.upstream_cmd)[0]
    env, _ = env_items(proxy.upstream_env)
    cwd = proxy.upstream_cwd or None
    if "/" in program:
        path = os.path.join(cwd, program) if cwd and not os.path.isabs(program) else program
        if not os.path.isfile(path) or not os.access(path, os.X_OK):
            return f"{program!r} is not an executable file"
        return None
    if shutil.which(program, path=env.get("PATH", os.environ.get("PATH"))) is None:
        return f"{program!r} is not found on PATH"
    return None


#: The prefixes of the proxy's own variables, never passed to a stdio server it starts: its settings
#: (among them ``state_url``, which may carry the store's password, and ``state_secret``) and
#: OpenTelemetry's (``OTEL_EXPORTER_OTLP_HEADERS`` carries the collector's token), the only ones it reads.
OWN_PREFIXES = ("MCP_NORMALIZER_", "OTEL_")


def env_items(items: Iterable[str]) -> tuple[dict[str, str], tuple[str, ...]]:
    """The variables the ``NAME=VALUE`` items of ``items`` set, and the names the ``NAME`` items
    pass through from the proxy's environment (``upstream_env``, ``stdio --env``).

    Raises:
        ValueError: an item with no name (``=VALUE``, or empty), or one holding a NUL character.
    """
    values: dict[str, str] = {}
    passed: list[str] = []
    for item in items:
        name, sep, value = item.partition("=")
        if not name or "\0" in item:
            raise ValueError(f"{item!r} is not NAME=VALUE or NAME (a name, then = and the value, which may be empty)")
        if sep:
            values[name] = value
        else:
            passed.append(name)
    return values, tuple(passed)


def redact_url(url: str) -> str:
    """``url`` as logs may show it: without the credentials of its authority
    (``http://u:p@h/x`` -> ``http://***@h/x``) and with every query value hidden
    (``?api_key=s3cret&v=2`` -> ``?api_key=***&v=***``: a query often carries a key)."""
    parts = urlsplit(url)
    if "@" in parts.netloc:
        parts = parts._replace(netloc="***@" + parts.netloc.rpartition("@")[2])
    if parts.query:
        names = (field.partition("=")[0] for field in parts.query.split("&"))
        parts = parts._replace(query="&".join(f"{name}=***" for name in names))
    return parts.geturl()


_SETTINGS_KEYS = spec(Settings)
