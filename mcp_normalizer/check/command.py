"""``mcp-normalizer check``: audit a live MCP server, or a capture of its traffic, and report every
fault the proxy would repair, changing nothing.

::

    mcp-normalizer check URL [--header 'Name: value' ...] [--call TOOL ['{json args}'] ...]
                             [--calls FILE] [--format table|json] [--config FILE] [--era auto|legacy|VERSION]
                             [--host PROFILE [--host-version V]] [--timeout S] [--deadline S] [--max-message-bytes N]
                             [--max-listing-bytes N] [--write-config FILE] [--strict]
    mcp-normalizer check --capture FILE [--format table|json] [--config FILE] [--write-config FILE]

It lists every tool (all pages) and calls only the tools it is asked to call (tools can have side
effects). ``--host PROFILE`` audits as that host receives the server (``claude-code``, ``codex``...:
:mod:`mcp_normalizer.engine.rules.host_profiles`): its ``clientInfo`` is sent, and what it refuses is a
fault; through the proxy, the host's repairs are made for it. ``--host-version V`` audits as that
version of the host (its ``clientInfo.version``): a fault only some versions have is then judged for
it (without, for every version that has one). It reads within bounds: each page and
result up to ``--max-message-bytes``, the listing up to ``--max-listing-bytes`` (and 1,000 pages), the
whole run up to ``--deadline`` seconds; a bound met is a finding that says what was cut. Exit codes: 0 clean (advisories
only: SHOULD-level faults no supported client rejects; ``--strict`` makes them 1), 1 faults found,
2 usage, configuration or connection errors.
"""

from __future__ import annotations

import functools
import math
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path

import anyio
import httpx

from ..arguments import Parser
from ..config import NormalizerConfig, redact_url, rule_config
from ..engine.rules.clients import UNKNOWN, profile_for
from ..engine.rules.host_profiles import PROFILES, Host
from ..errors import CheckError, ConfigError, DecodeError
from ..types import JSONObject
from ..wire.eras import era_of
from ..wire.jsoncodec import dumps, loads
from .auditor import Audit, Auditor
from .client import MAX_LISTING_BYTES, MAX_MESSAGE_BYTES, Cut, McpClient, TooLarge
from .replay import replay
from .report import as_json, as_table
from .write_config import rule_file

Call = tuple[str, JSONObject]
#: The default ``--deadline``: seconds for the whole run.
DEADLINE = 120.0
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # RFC 9110 section 5.6.2
_FIELD_VALUE = re.compile(r"[\x20-\x7e\t]*")


def _parser() -> Parser:
    parser = Parser(
        prog="mcp-normalizer check",
        description="Report every fault the proxy would repair in a server's tools and results. Exit 0 clean "
        "(or advisories only), 1 faults, 2 errors.",
    )
    parser.add_argument("url", nargs="?", help="the server's MCP endpoint (Streamable HTTP)")
    parser.add_argument("--capture", help="audit a capture file (JSON lines) offline instead of a live server")
    parser.add_argument(
        "--header", action="append", default=[], metavar="'NAME: VALUE'", help="request header (repeatable)"
    )
    parser.add_argument(
        "--call",
        action="append",
        nargs="+",
        default=[],
        metavar=("TOOL", "ARGS"),
        help="call TOOL with the JSON object ARGS (default {}) and audit the result (repeatable)",
    )
    parser.add_argument("--calls", help='file of calls: a JSON array (or JSON lines) of {"name", "arguments"}')
    parser.add_argument("--format", choices=("table", "json"), default="table")
    parser.add_argument(
        "--config",
        help="rule file (env MCP_NORMALIZER_CONFIG; default: the shipped config/normalizer.toml); the"
        " MCP_NORMALIZER_* variables of its keys apply, as for the proxy",
    )
    parser.add_argument(
        "--era",
        default="auto",
        help="auto (the newest the server speaks; default), legacy (the initialize handshake, 2025-11-25 offered)"
        " or a legacy version to offer",
    )
    parser.add_argument(
        "--host",
        choices=sorted(PROFILES),
        help="audit as this host receives the server: its clientInfo is sent, and what it refuses is a fault",
    )
    parser.add_argument(
        "--host-version",
        help="with --host: the host's version (its clientInfo.version), for the faults only some versions have"
        " (default: every version's)",
    )
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per request (default 30)")
    parser.add_argument(
        "--deadline",
        type=float,
        default=DEADLINE,
        help=f"seconds the whole run may take (default {DEADLINE:g}); past it what was read is reported, with a"
        " finding that says what was not",
    )
    parser.add_argument(
        "--max-message-bytes",
        type=int,
        default=MAX_MESSAGE_BYTES,
        metavar="N",
        help=f"bytes of one tools/list page or tools/call result read at most (default {MAX_MESSAGE_BYTES}, the"
        " proxy's max_message_bytes); a larger one is cut, a finding says so",
    )
    parser.add_argument(
        "--max-listing-bytes",
        type=int,
        default=MAX_LISTING_BYTES,
        metavar="N",
        help=f"bytes of all tools/list pages together read at most (default {MAX_LISTING_BYTES}); paging stops"
        " there, a finding says so",
    )
    parser.add_argument(
        "--write-config",
        metavar="FILE",
        help="write a rule file with every fix (commented with the findings; --config's file copied first):"
        " the proxy started with it makes the same audit clean",
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="exit 1 for advisories too (SHOULD-level faults no supported client rejects)",
    )
    return parser


def _arguments(text: str, where: str) -> JSONObject:
    try:
        value = loads(text)
    except DecodeError:
        raise CheckError(f"{where}: arguments are not JSON: {text[:80]!r}") from None
    if not isinstance(value, dict):
        raise CheckError(f"{where}: arguments must be a JSON object")
    return value


def _call(name: str, arguments: JSONObject, where: str) -> Call:
    """A call whose tool name and arguments can be sent (UTF-8, no lone surrogates).

    Raises:
        CheckError: they cannot.
    """
    try:
        name.encode()
        dumps(arguments)
    except (UnicodeEncodeError, DecodeError):
        raise CheckError(f"{where}: the tool name or arguments are not valid UTF-8 text") from None
    return name, arguments


def _calls(flags: list[list[str]], file: str | None) -> list[Call]:
    """The calls asked for, from ``--call`` flags and the ``--calls`` file, in that order.

    Raises:
        CheckError: a call is malformed or the file cannot be read.
    """
    calls: list[Call] = []
    for flag in flags:
        if len(flag) > 2:
            raise CheckError(f"--call takes a tool name and one JSON object, got {len(flag)} values")
        where = f"--call {flag[0]!r}"
        calls.append(_call(flag[0], _arguments(flag[1], where) if len(flag) == 2 else {}, where))
    if file is None:
        return calls
    try:
        text = Path(file).read_bytes()
    except OSError as exc:
        raise CheckError(f"cannot read --calls {file}: {exc.strerror or exc}") from None
    try:
        decoded = loads(text)
        entries = decoded if isinstance(decoded, list) else [decoded]
    except DecodeError:
        try:
            entries = [loads(line) for line in text.splitlines() if line.strip()]
        except DecodeError:
            raise CheckError(f"--calls {file}: neither a JSON array nor JSON lines") from None
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise CheckError(f'--calls {file}: every call must be an object with a string "name"')
        arguments = entry.get("arguments", {})
        if not isinstance(arguments, dict):
            raise CheckError(f"--calls {file}: the arguments of {entry['name']} must be a JSON object")
        calls.append(_call(entry["name"], arguments, f"--calls {file}"))
    return calls


def _headers(flags: list[str]) -> dict[str, str]:
    """``--header`` flags as a mapping. A value is never shown in a message (it may be a secret).

    Raises:
        CheckError: a flag is not ``Name: value``, the name is not an RFC 9110 token, or the
            value holds anything but visible ASCII, spaces and tabs.
    """
    headers: dict[str, str] = {}
    for flag in flags:
        name, colon, value = flag.partition(":")
        name, value = name.strip(), value.strip()
        if not colon or not _TOKEN.fullmatch(name):
            raise CheckError(f"--header: expected 'Name: value' with a token for a name (got name {name[:40]!r})")
        if not _FIELD_VALUE.fullmatch(value):
            raise CheckError(f"--header {name!r}: the value must be visible ASCII (no control characters)")
        headers[name.lower()] = value
    return headers


def _url(text: str) -> str:
    """``text`` if it is an ``http``/``https`` URL with a host and a valid port.

    Raises:
        CheckError: it is not.
    """
    try:
        url = httpx.URL(text)
        port = url.port
    except (httpx.InvalidURL, ValueError):
        raise CheckError(f"not a valid URL: {redact_url(text)[:200]!r}") from None
    if url.scheme not in ("http", "https") or not url.host or (port is not None and not 0 < port < 65536):
        raise CheckError(f"not an http(s) URL with a host and a valid port: {redact_url(text)[:200]!r}")
    return text


async def audit_server(
    url: str,
    calls: Sequence[Call],
    config: NormalizerConfig,
    headers: dict[str, str],
    *,
    era: str = "auto",
    timeout: float = 30.0,
    host: Host | None = None,
    host_version: str | None = None,
    deadline: float = DEADLINE,
    max_message_bytes: int = MAX_MESSAGE_BYTES,
    max_listing_bytes: int = MAX_LISTING_BYTES,
) -> tuple[Audit, str | None]:
    """Connect to ``url`` (``era`` as :meth:`McpClient.connect` takes it), list every tool, make
    ``calls`` and audit it all, within the bounds: ``max_message_bytes`` per page and per result,
    ``max_listing_bytes`` for the listing, ``deadline`` seconds for the whole run. A bound met is a
    finding (:meth:`Auditor.bound`) and the audit goes on with what was read (past the deadline:
    it ends there). A call of a tool the listing does not name is a finding, and is not made.

    Returns:
        The audit and the era the server speaks (``None`` when the deadline came first).

    Raises:
        CheckError: the server cannot be reached or does not answer with JSON-RPC.
    """
    name = host.client_names[0] if host is not None else "mcp-normalizer-check"
    # (the host's model API family as the rule file names it for it: [clients."NAME"] model_api)
    version = host_version if host is not None else None
    profile = profile_for({"name": name, "version": version})
    auditor = Auditor(config, config.for_client(profile) if host is not None else UNKNOWN)
    used: str | None = None
    doing = "connecting"
    pages = done = 0

    def page(result: JSONObject) -> None:
        nonlocal pages
        auditor.tools_list(result, used, first_page=pages == 0)
        pages += 1

    async with McpClient(
        url, headers, timeout, client_name=name, max_message_bytes=max_message_bytes, client_version=version
    ) as client:
        client.ends_at = anyio.current_time() + deadline
        with anyio.move_on_after(deadline) as run:
            used = await client.connect(era)
            legacy = [version for version in client.supported if era_of(version).sessions]
            if legacy:
                auditor.audit.notes.append(
                    f"the server also speaks {', '.join(legacy)}: run with --era legacy to audit what legacy"
                    " clients (TS SDK 1.x, most hosts today) get"
                )
            doing = "listing tools"
            cut = await client.list_tools(page, listing_bytes=max_listing_bytes)
            listing_cut = cut is not None and cut.bound != "cursor"
            if cut is not None:
                _report_cut(auditor, cut)
            for tool, arguments in calls:
                doing = f"calling {tool}"
                if not auditor.listed(tool):
                    why = "not listed by the server (tools/list)"
                    if listing_cut:
                        why = "not in the tools/list pages read (the listing was cut)"
                    auditor.unlisted(tool, why)
                    done += 1
                    continue
                try:
                    answer = await client.call_tool(tool, arguments)
                except TooLarge as exc:
                    what = f"the result of {tool} is larger than --max-message-bytes ({exc.limit} bytes): cut after"
                    auditor.bound("tools/call", "max_message_bytes", f"{what} {exc.read} bytes read; not audited")
                else:
                    _audit_answer(auditor, tool, answer, used)
                done += 1
        if run.cancelled_caught:
            what = f"the run met --deadline ({deadline:g} s) while {doing}: {pages} tools/list pages read"
            what += f"; {done} of {len(calls)} calls done" + (f", {len(calls) - done} not" if done < len(calls) else "")
            auditor.bound("tools/call" if doing.startswith("calling") else "tools/list", "deadline", what)
    return auditor.audit, used


def _report_cut(auditor: Auditor, cut: Cut) -> None:
    """Report why the listing stopped early: a repeating cursor (the server's fault) or a bound."""
    if cut.bound == "cursor":
        auditor.paging(cut.text)
        return
    bound = {"message": "max_message_bytes", "listing": "max_listing_bytes", "pages": "max_pages"}[cut.bound]
    auditor.bound("tools/list", bound, cut.text)


def _audit_answer(auditor: Auditor, tool: str, answer: JSONObject, era: str | None) -> None:
    """Audit the response to a call of ``tool``: its result, or note why not."""
    result = answer.get("result")
    if not isinstance(result, dict):
        error = answer.get("error")
        message = error.get("message") if isinstance(error, dict) else None
        auditor.audit.notes.append(f"call {tool}: JSON-RPC error {message!r}; nothing to audit")
    elif result.get("resultType", "complete") != "complete" or "task" in result:
        auditor.audit.notes.append(f"call {tool}: resultType {result.get('resultType')!r}; not audited")
    else:
        auditor.tools_call(tool, result, era)


def audit_capture(path: str, config: NormalizerConfig) -> Audit:
    """Audit a capture file offline (see :mod:`mcp_normalizer.check.replay`).

    Raises:
        CheckError: the file cannot be read.
    """
    auditor = Auditor(config)
    try:
        with Path(path).open("rb") as lines:
            replay(lines, auditor)
    except OSError as exc:
        raise CheckError(f"cannot read --capture {path}: {exc.strerror or exc}") from None
    return auditor.audit


def main(argv: Sequence[str]) -> int:
    """Run ``check`` with ``argv`` (the arguments after ``check``); returns the exit code."""
    args = _parser().parse_args(list(argv))
    if args.url is None and any("://" in value for flag in args.call for value in flag[1:]):
        return _fail("the server URL was read as --call arguments: give the URL before the options")
    if (args.url is None) == (args.capture is None):
        return _fail("give either a server URL or --capture FILE")
    if not 0 < args.timeout < math.inf:
        return _fail(f"--timeout must be a positive number of seconds, not {args.timeout}")
    if not 0 < args.deadline < math.inf:
        return _fail(f"--deadline must be a positive number of seconds, not {args.deadline}")
    for option, value in (
        ("--max-message-bytes", args.max_message_bytes),
        ("--max-listing-bytes", args.max_listing_bytes),
    ):
        if value < 1:
            return _fail(f"{option} must be a positive number of bytes, not {value}")
    try:
        config_file = args.config or os.environ.get("MCP_NORMALIZER_CONFIG") or None
        config = rule_config(config_file)  # as the proxy reads it: the file, then the MCP_NORMALIZER_* keys
        if args.capture is not None:
            if args.host is not None:
                return _fail("--host audits a live server (its clientInfo is sent), not a capture")
            if args.call or args.calls or args.header:
                return _fail("--capture audits a file: --call, --calls and --header do not apply")
            audit, source = audit_capture(args.capture, config), args.capture
            era = ", ".join(audit.eras) or None
        else:
            url, calls, headers = _url(args.url), _calls(args.call, args.calls), _headers(args.header)
            host = PROFILES[args.host] if args.host is not None else None
            if args.host_version is not None and (host is None or not args.host_version.strip()):
                return _fail("--host-version needs --host and a version")
            run = functools.partial(
                audit_server,
                era=args.era,
                timeout=args.timeout,
                host=host,
                host_version=args.host_version,
                deadline=args.deadline,
                max_message_bytes=args.max_message_bytes,
                max_listing_bytes=args.max_listing_bytes,
            )
            audit, era = anyio.run(run, url, calls, config, headers)
            source = redact_url(url)
        if args.write_config is not None:
            base = Path(config_file).read_text(encoding="utf-8") if config_file else ""
            _write(args.write_config, rule_file(audit.findings, source, base))
    except (CheckError, ConfigError) as exc:
        return _fail(str(exc))
    report = as_json if args.format == "json" else as_table
    print(report(audit, source, era, args.host))
    blocking = [finding for finding in audit.findings if args.strict or not finding.advisory]
    return 1 if blocking else 0


def _write(path: str, text: str) -> None:
    """Write ``text`` to ``path`` (replacing it whole: written beside it, then renamed).

    Raises:
        CheckError: the file cannot be written.
    """
    target = Path(path)
    partial = target.with_name(f".{target.name}.partial")
    try:
        partial.write_text(text, encoding="utf-8")
        partial.replace(target)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise CheckError(f"cannot write --write-config {path}: {exc.strerror or exc}") from None


def _fail(message: str) -> int:
    print(f"mcp-normalizer check: error: {message}", file=sys.stderr)
    return 2
