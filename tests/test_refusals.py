"""Refusals explain themselves: the message names the setting, each cause and peer is logged once
per interval with a count of the rest, every refusal is counted, and the memory of peers is bounded.
``configure_logging`` touches only the loggers its docstring (and the README) name."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import orjson
import pytest

from mcp_normalizer.config import ProxyConfig
from mcp_normalizer.ops.logs import PROCESS_LOGGERS, JSONFormatter, configure_logging
from mcp_normalizer.ops.metrics import Metrics
from mcp_normalizer.ops.refusals import CAUSES, HOST, ORIGIN, RefusalLog, peer_of, refusal_message

pytestmark = pytest.mark.pure


class Clock:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock()
    monkeypatch.setattr("mcp_normalizer.ops.refusals.time.monotonic", c)
    return c


def lines(caplog: pytest.LogCaptureFixture) -> list[dict[str, object]]:
    formatter = JSONFormatter()
    return [orjson.loads(formatter.format(r)) for r in caplog.records if r.name == "mcp_normalizer.refusals"]


def counted(metrics: Metrics, cause: str) -> float:
    value = metrics.registry.get_sample_value("mcp_normalizer_refusals_total", {"cause": cause})
    return value or 0.0


def test_every_cause_with_a_setting_names_a_real_proxy_setting_and_its_variable() -> None:
    fields = set(ProxyConfig.__dataclass_fields__)
    for cause in CAUSES.values():
        assert 400 <= cause.status < 600
        if cause.setting:
            assert cause.setting in fields, cause
            assert cause.env == "MCP_NORMALIZER_" + cause.setting.upper()
            assert cause.setting in refusal_message(cause) and cause.env in refusal_message(cause)
        else:
            assert cause.env == "" and "setting" not in refusal_message(cause)


def test_the_message_carries_the_detail_and_the_setting() -> None:
    assert refusal_message(HOST, "host 'normalizer:8765'") == (
        "Host not allowed (host 'normalizer:8765'); the proxy's setting allowed_hosts "
        "(MCP_NORMALIZER_ALLOWED_HOSTS) allows it"
    )


def test_a_refusal_hands_back_the_message_and_never_echoes_a_value_it_is_told_to_keep(
    clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    log = RefusalLog(None)
    with caplog.at_level(logging.WARNING, "mcp_normalizer.refusals"):
        said = log.refused(HOST, peer_of({"client": ("10.0.0.9", 50123)}), "Host 'rebind.evil.example'", told="")
        again = log.refused(HOST, "10.0.0.9", "Host 'rebind.evil.example'", told="")  # throttled: same answer
        sized = log.refused(CAUSES["body_size"], peer_of({}), "over 1048576 bytes")
    assert said == again == refusal_message(HOST) and "evil" not in said
    assert sized == refusal_message(CAUSES["body_size"], "over 1048576 bytes")
    assert [(g["peer"], g["detail"]) for g in lines(caplog)] == [
        ("10.0.0.9", "Host 'rebind.evil.example'"),
        ("unknown", "over 1048576 bytes"),
    ]


def test_one_line_per_cause_and_peer_per_interval_then_the_count_of_the_rest(
    clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    metrics = Metrics()
    log = RefusalLog(metrics, interval=60)
    with caplog.at_level(logging.WARNING, "mcp_normalizer.refusals"):
        for _ in range(5):
            log.refused(HOST, "10.0.0.7", "host 'a:1'")
        log.refused(HOST, "10.0.0.8", "host 'a:1'")  # another peer: its own line
        log.refused(ORIGIN, "10.0.0.7", "origin 'https://x'")  # another cause: its own line
        clock.now += 59.9
        log.refused(HOST, "10.0.0.7", "host 'a:1'")  # still inside the interval
        clock.now += 0.2
        log.refused(HOST, "10.0.0.7", "host 'b:2'")
    got = lines(caplog)
    assert [(g["cause"], g["peer"], g.get("suppressed")) for g in got] == [
        ("host", "10.0.0.7", None),
        ("host", "10.0.0.8", None),
        ("origin", "10.0.0.7", None),
        ("host", "10.0.0.7", 5),
    ]
    assert got[0] == {
        "ts": got[0]["ts"],
        "level": "warning",
        "logger": "mcp_normalizer.refusals",
        "event": "refusal",
        "cause": "host",
        "status": 421,
        "peer": "10.0.0.7",
        "setting": "allowed_hosts",
        "env": "MCP_NORMALIZER_ALLOWED_HOSTS",
        "detail": "host 'a:1'",
    }
    assert got[-1]["detail"] == "host 'b:2'"
    assert counted(metrics, "host") == 8 and counted(metrics, "origin") == 1


def test_interval_zero_logs_every_refusal_and_an_unknown_peer_is_named(
    clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    log = RefusalLog(None, interval=0)
    with caplog.at_level(logging.WARNING, "mcp_normalizer.refusals"):
        for _ in range(3):
            log.refused(CAUSES["body_size"], None, "limit 1048576 bytes")
    got = lines(caplog)
    assert [g["peer"] for g in got] == ["unknown"] * 3
    assert all("suppressed" not in g for g in got)


def test_a_scan_from_many_peers_holds_bounded_memory_and_forgets_the_oldest(
    clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    log = RefusalLog(None, interval=60, max_pairs=3)
    with caplog.at_level(logging.WARNING, "mcp_normalizer.refusals"):
        for i in range(1000):
            log.refused(HOST, f"198.51.100.{i % 250}:{i}")
        assert len(log._pairs) == 3
        log.refused(HOST, "198.51.100.249:999")  # remembered: not logged again
        log.refused(HOST, "198.51.100.0:0")  # forgotten: logged again
    peers = [g["peer"] for g in lines(caplog)]
    assert len(peers) == 1001 and peers[-1] == "198.51.100.0:0"


@pytest.fixture
def pristine_loggers() -> Iterator[None]:
    names = ("mcp_normalizer", *PROCESS_LOGGERS, "uvicorn.error", "uvicorn.access")
    loggers = [logging.getLogger(n) for n in names]
    saved = {lg.name: (lg.handlers[:], lg.propagate, lg.level) for lg in loggers}
    yield
    for n, (handlers, propagate, level) in saved.items():
        logger = logging.getLogger(n)
        logger.handlers, logger.propagate = handlers, propagate
        logger.setLevel(level)


def test_configure_logging_touches_the_mcp_normalizer_logger_alone(pristine_loggers: None) -> None:
    hosts = {n: logging.NullHandler() for n in ("uvicorn", "uvicorn.error", "asyncio", "opentelemetry")}
    for name, handler in hosts.items():
        logging.getLogger(name).handlers = [handler]
    configure_logging("info")
    ours = logging.getLogger("mcp_normalizer")
    assert len(ours.handlers) == 1 and isinstance(ours.handlers[0].formatter, JSONFormatter)
    assert ours.propagate is False and ours.level == logging.INFO
    for name, handler in hosts.items():
        assert logging.getLogger(name).handlers == [handler], name


def test_configure_logging_for_a_process_takes_over_uvicorn_asyncio_and_opentelemetry(pristine_loggers: None) -> None:
    logging.getLogger("uvicorn.error").handlers = [logging.NullHandler()]
    configure_logging("warning", process=True)
    handler = logging.getLogger("mcp_normalizer").handlers[0]
    for name in PROCESS_LOGGERS:
        assert logging.getLogger(name).handlers == [handler], name
        assert logging.getLogger(name).level == logging.WARNING
    assert logging.getLogger("uvicorn.error").handlers == [] and logging.getLogger("uvicorn.error").propagate
