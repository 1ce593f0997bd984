"""The era registry (:mod:`mcp_normalizer.wire.eras`, issue 41 item 4): every question for every
known era, the one policy for unknown versions, and on the wire the same reading of an unknown
version on the HTTP path and on the stdio upstream (``mcp-normalizer -- CMD``)."""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import pytest

from mcp_normalizer.demo.upstream import ScriptedServer, ToolSpec, returning
from mcp_normalizer.wire import eras
from mcp_normalizer.wire.eras import ERAS, NEWEST, OLDEST, UNNAMED, Era, era_of, known
from mcp_normalizer.wire.jsonrpc import PROTOCOL_VERSION_META

from .support import EXE, HEADERS, free_port, proxy_for, running, serve
from .test_stdio_wrapper import fixture

STATELESS_FIELDS = frozenset({"resultType", "ttlMs", "cacheScope"})

#: version -> (sessions, structured_any, list_changed_anywhere, result_fields, list_fields)
EXPECTED: dict[str, tuple[bool, bool, bool, frozenset[str], frozenset[str]]] = {
    "2024-11-05": (True, False, True, frozenset(), frozenset()),
    "2025-03-26": (True, False, True, frozenset(), frozenset()),
    "2025-06-18": (True, False, True, frozenset(), frozenset()),
    "2025-11-25": (True, False, True, frozenset(), frozenset()),
    "2026-07-28": (False, True, False, frozenset({"resultType"}), STATELESS_FIELDS),
}

#: Unknown versions and the known era each is read as.
UNKNOWN = {
    "draft-2027": "2026-07-28",  # not a date: a draft of a version to come
    "DRAFT-2026-v1": "2026-07-28",  # the specification's own draft tag
    "2027-01-01": "2026-07-28",  # a date after every known one
    "2025-09-01": "2025-06-18",  # between two: the newest not after it
    "2024-01-01": "2024-11-05",  # before every known one: the oldest
    "": "2025-03-26",  # no version named (S2025-06-18 transports: assume 2025-03-26)
    "   ": "2025-03-26",
    " 2026-07-28 ": "2026-07-28",  # a known version with spaces around it
}


@pytest.mark.pure
@pytest.mark.parametrize("version", list(EXPECTED))
def test_every_question_for_every_known_era(version: str) -> None:
    era = era_of(version)
    assert era.version == version and known(version) and era is eras.BY_VERSION[version]
    sessions, structured_any, anywhere, result_fields, list_fields = EXPECTED[version]
    assert era.sessions is sessions and era.stateless is (not sessions)
    assert era.structured_any is structured_any
    assert era.list_changed_anywhere is anywhere
    assert era.result_fields == result_fields and era.list_fields == list_fields
    assert era.lists_expire is ("ttlMs" in list_fields)
    assert era.result_fields <= era.list_fields
    assert era.source.startswith(f"S{version}/")  # the spec section it rests on


@pytest.mark.pure
def test_the_registry_knows_the_five_eras_oldest_first() -> None:
    assert [era.version for era in ERAS] == list(EXPECTED) == sorted(EXPECTED)
    assert (OLDEST.version, NEWEST.version, UNNAMED.version) == ("2024-11-05", "2026-07-28", "2025-03-26")
    assert eras.NEWEST_LEGACY.version == "2025-11-25" and eras.FIRST_STATELESS is NEWEST
    assert "tools/list" in eras.CACHEABLE_METHODS and "tools/call" not in eras.CACHEABLE_METHODS


@pytest.mark.pure
@pytest.mark.parametrize(("version", "read_as"), list(UNKNOWN.items()))
def test_an_unknown_version_is_read_as_one_known_era(version: str, read_as: str) -> None:
    era = era_of(version)
    assert isinstance(era, Era) and era is eras.BY_VERSION[read_as]
    assert not known(version)
    assert era_of(version) is era  # (remembered: the same answer every time)


@pytest.mark.pure
def test_no_version_is_the_legacy_default() -> None:
    assert era_of(None) is UNNAMED and not known(None)
    assert era_of(None).sessions and not era_of(None).structured_any and not era_of(None).lists_expire


@pytest.mark.pure
def test_many_unknown_versions_hold_no_memory() -> None:
    """The cache of unknown versions is bounded: a client sending a new version per request grows nothing."""
    for n in range(2000):
        era_of(f"x-{n}")
    assert eras._unknown.cache_info().currsize <= 256


# -- on the wire: the HTTP path and the stdio upstream read an unknown version alike ---------------

TEMPERATURE = {"name": "temperature", "inputSchema": {"type": "object"}, "outputSchema": {"type": "number"}}
RESULT = {"content": [{"type": "text", "text": "21.5"}], "structuredContent": 21.5}
LEGACY_INIT = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
}


async def what_the_client_gets(url: str, version: str) -> tuple[int, Any, Any]:
    """tools/list then tools/call of ``temperature`` at ``version``: the call's HTTP status, the
    listed ``outputSchema`` and the result's ``structuredContent`` (``None`` for a refusal).

    A version read as stateless is sent as 2026-07-28 sends (the version in every request's header
    and ``_meta``, no session); one read as legacy after an ``initialize`` (its session), the version
    in the header."""
    era = era_of(version)
    async with httpx.AsyncClient(timeout=30) as http:
        session: dict[str, str] = {}
        if era.sessions:
            opened = await http.post(url, content=orjson.dumps(LEGACY_INIT), headers=HEADERS)
            assert opened.status_code == 200, opened.text
            session = {"mcp-session-id": opened.headers["mcp-session-id"]}
            note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            await http.post(url, content=orjson.dumps(note), headers={**HEADERS, **session})

        async def request(rid: int, method: str, params: dict[str, Any]) -> httpx.Response:
            headers = {**HEADERS, **session, "mcp-protocol-version": version}
            if era.stateless:
                headers["mcp-method"] = method
                if "name" in params:
                    headers["mcp-name"] = params["name"]
                meta = {PROTOCOL_VERSION_META: version, "io.modelcontextprotocol/clientCapabilities": {}}
                params = {**params, "_meta": meta}
            body = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
            return await http.post(url, content=orjson.dumps(body), headers=headers)

        def message(response: httpx.Response) -> Any:
            if response.headers.get("content-type", "").startswith("application/json"):
                return response.json()
            return [orjson.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")][-1]

        listed = await request(1, "tools/list", {})
        called = await request(2, "tools/call", {"name": "temperature", "arguments": {}})
    if called.status_code != 200:
        return called.status_code, None, None
    schema = message(listed)["result"]["tools"][0]["outputSchema"]
    return called.status_code, schema, message(called)["result"]["structuredContent"]


@pytest.mark.wire
@pytest.mark.anyio
@pytest.mark.parametrize("version", ["draft-2027", "2027-01-01", "2024-01-01", "2026-07-28", "2025-11-25"])
async def test_an_unknown_version_is_read_alike_on_the_http_path_and_the_stdio_upstream(version: str) -> None:
    """Before the registry, ``draft-2027`` was 2026-07-28 on the HTTP path (its results left as any
    JSON value) and legacy on the stdio upstream (400: a session is required). Now both read it as
    the registry does: the same status, the same listed schema, the same result, through an HTTP
    upstream and through ``mcp-normalizer -- CMD``; and as the known era it is read as."""
    upstream = ScriptedServer([ToolSpec(TEMPERATURE, returning(RESULT))], response_mode="json")
    with serve(upstream) as up, proxy_for(up + "/mcp") as px:
        over_http = await what_the_client_gets(px + "/mcp", version)
    port = free_port()
    plan = {"tools": [TEMPERATURE], "results": {"temperature": RESULT}, "faults": {}}
    with running([EXE, "--port", str(port), "--", *fixture(plan)], port):
        over_stdio = await what_the_client_gets(f"http://127.0.0.1:{port}/mcp", version)
    assert over_http == over_stdio
    status, schema, value = over_stdio
    assert status == 200
    if era_of(version).structured_any:  # as 2026-07-28: any JSON value, untouched
        assert (schema, value) == ({"type": "number"}, 21.5)
    else:  # legacy: an object root, the number wrapped
        assert schema["type"] == "object" and isinstance(value, dict) and 21.5 in value.values()
