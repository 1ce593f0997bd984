"""Behind a load balancer, with OAuth: forwarding headers and ``public_url`` (issue 12, section 2).

The upstream is the MCP Python SDK's own OAuth resource server (``MCPServer`` with ``AuthSettings``
and a token verifier): it answers 401 with ``WWW-Authenticate: Bearer resource_metadata=...`` and
serves RFC 9728 metadata naming the URL it was configured with, an internal one. The client is the
real TS client 2.4.0 connecting with an OAuth provider: it runs its discovery through the proxy and
stops at the redirect to the authorization server (a separate origin, as in most deployments).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import anyio
import httpx
import orjson
import pytest
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from pydantic import AnyHttpUrl

from mcp_normalizer import NormalizerConfig
from mcp_normalizer.config import ProxyConfig
from mcp_normalizer.demo.clients import run_node
from mcp_normalizer.types import Receive, Scope, Send
from mcp_normalizer.wire.forwarded import ForwardingPolicy, parse_networks
from mcp_normalizer.wire.public import rewrite_document, rewrite_www_authenticate

from .support import HEADERS, free_port, proxy_for, serve

pytestmark = pytest.mark.wire


class NoTokens:
    """A token verifier that knows no token: every request is unauthorized."""

    async def verify_token(self, token: str) -> AccessToken | None:
        return None


class AuthorizationServer:
    """An RFC 8414 authorization server's metadata document, on its own origin."""

    def __init__(self) -> None:
        self.url = ""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        if scope["path"] != "/.well-known/oauth-authorization-server":
            await send({"type": "http.response.start", "status": 404, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        document = {
            "issuer": self.url,
            "authorization_endpoint": self.url + "/authorize",
            "token_endpoint": self.url + "/token",
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code"],
            "code_challenge_methods_supported": ["S256"],
        }
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": orjson.dumps(document)})


def protected_server(resource_url: str, issuer: str) -> Any:
    """The SDK's resource server, configured with ``resource_url`` (what it believes it is)."""
    server = MCPServer(
        "protected",
        token_verifier=NoTokens(),
        auth=AuthSettings(
            issuer_url=AnyHttpUrl(issuer), resource_server_url=AnyHttpUrl(resource_url), validate_token_resource=False
        ),
    )

    @server.tool()
    def hello() -> str:
        return "hello"

    return server.streamable_http_app(json_response=True)


def _public(url: str) -> NormalizerConfig:
    return dataclasses.replace(NormalizerConfig.shipped(), proxy=dataclasses.replace(ProxyConfig(), public_url=url))


@pytest.mark.anyio
async def test_the_ts_client_discovers_oauth_through_the_proxy_only_with_public_url() -> None:
    """Without ``public_url`` the metadata names the internal URL and the client cannot use it; with
    it, discovery goes through and the client is sent to the authorization server for the URL it
    dialled (RFC 8707 ``resource``)."""
    issuer = AuthorizationServer()
    port = free_port()
    public = f"http://127.0.0.1:{port}"
    with serve(issuer) as auth_url:
        issuer.url = auth_url
        internal = "http://10.0.0.7:3001/mcp"  # what the server was configured as: not reachable
        with serve(protected_server(internal, auth_url), lifespan="on") as up:
            with proxy_for(up + "/mcp") as plain:
                refused = await run_node("v2", [{"url": plain + "/mcp", "steps": [], "oauth": {"clientId": "c1"}}])
            with proxy_for(up + "/mcp", _public(public), port=port) as px:
                assert px == public
                accepted = await run_node("v2", [{"url": px + "/mcp", "steps": [], "oauth": {"clientId": "c1"}}])
                async with httpx.AsyncClient(timeout=10) as http:
                    challenge = await http.post(px + "/mcp", content=b"{}", headers=HEADERS)
                    document = await http.get(px + "/.well-known/oauth-protected-resource/mcp")
    # Without public_url the client cannot use the metadata (its resource_metadata URL is internal):
    # it falls back to the 2025-03-26 rule, "the MCP server is its own authorization server", and
    # sends the user to an /authorize of the proxy's origin that does not exist; the real
    # authorization server is never found.
    lost = httpx.URL(refused[0]["authorizationUrl"])
    assert str(lost.copy_with(query=None)) == plain + "/authorize" and "resource" not in lost.params
    sent_to = httpx.URL(accepted[0]["authorizationUrl"])
    assert str(sent_to.copy_with(query=None)) == auth_url + "/authorize"
    assert sent_to.params["resource"] == public + "/mcp" and sent_to.params["client_id"] == "c1"
    assert challenge.status_code == 401
    expected = f'resource_metadata="{public}/.well-known/oauth-protected-resource/mcp"'
    assert expected in challenge.headers["www-authenticate"]
    assert document.json()["resource"] == public + "/mcp"
    assert document.json()["authorization_servers"][0].rstrip("/") == auth_url  # another origin: untouched
    assert int(document.headers["content-length"]) == len(document.content)


def test_forwarding_headers_are_dropped_from_strangers_and_added_when_asked() -> None:
    stranger = [(b"x-forwarded-for", b"6.6.6.6"), (b"forwarded", b"for=6.6.6.6"), (b"accept", b"*/*")]
    assert ForwardingPolicy().apply(list(stranger), "203.0.113.9", "http", "mcp.example.com") == [(b"accept", b"*/*")]
    lb = ForwardingPolicy(add=True, trusted=parse_networks(["10.0.0.0/8"]))
    from_lb = [(b"x-forwarded-for", b"198.51.100.4"), (b"x-forwarded-proto", b"https"), (b"accept", b"*/*")]
    out = dict(lb.apply(from_lb, "10.1.2.3", "http", "mcp.example.com:443"))
    assert out[b"x-forwarded-for"] == b"198.51.100.4, 10.1.2.3"
    assert out[b"x-forwarded-proto"] == b"https"  # the balancer saw the client first
    assert out[b"x-forwarded-host"] == b"mcp.example.com:443"
    assert out[b"forwarded"] == b'for=10.1.2.3;proto=http;host="mcp.example.com:443"'
    ipv6 = dict(ForwardingPolicy(add=True).apply(list(stranger), "2001:db8::1", "https", "h"))
    assert ipv6[b"x-forwarded-for"] == b"2001:db8::1"  # the stranger's chain is gone
    assert ipv6[b"forwarded"] == b'for="[2001:db8::1]";proto=https;host=h'


@pytest.mark.anyio
async def test_the_upstream_sees_forwarding_headers_only_when_they_are_on() -> None:
    seen: list[dict[str, str]] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        seen.append({k.decode(): v.decode() for k, v in scope["headers"]})
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    forged = {"x-forwarded-for": "6.6.6.6", "x-forwarded-host": "evil.example"}
    on = dataclasses.replace(
        NormalizerConfig.shipped(), proxy=dataclasses.replace(ProxyConfig(), forwarded_headers=True)
    )
    with serve(app) as up:
        async with httpx.AsyncClient(timeout=10) as http:
            with proxy_for(up + "/mcp") as px:
                await http.get(px + "/x", headers=forged)
            with proxy_for(up + "/mcp", on) as px:
                await http.get(px + "/x", headers=forged)
    off_headers, on_headers = seen
    assert "x-forwarded-for" not in off_headers and "x-forwarded-host" not in off_headers  # never a forgery
    assert on_headers["x-forwarded-for"] == "127.0.0.1"
    assert on_headers["x-forwarded-host"] == httpx.URL(px).netloc.decode()
    assert on_headers["x-forwarded-proto"] == "http"
    assert on_headers["forwarded"].startswith("for=127.0.0.1;proto=http;host=")


def test_metadata_urls_move_to_the_public_origin_and_others_stay() -> None:
    public, upstream = "https://mcp.example.com", "http://127.0.0.1:3001"
    challenge = b'Bearer error="invalid_token", resource_metadata="http://10.0.0.7:3001/.well-known/oauth-protected-resource/mcp"'
    assert rewrite_www_authenticate(challenge, public, upstream) == (
        b'Bearer error="invalid_token", resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp"'
    )
    assert rewrite_www_authenticate(b"Basic realm=x", public, upstream) == b"Basic realm=x"
    for own_name in (upstream, "http://mcp-server:3001", "http://api.team.svc.cluster.local"):
        header = rewrite_www_authenticate(
            b'Bearer resource_metadata="%s/.well-known/x"' % own_name.encode(), public, upstream
        )
        assert header == b'Bearer resource_metadata="https://mcp.example.com/.well-known/x"'
    # A metadata host on a public origin of its own (issue 22): never moved to the proxy's origin.
    external = b'Bearer resource_metadata="https://auth.example.org/.well-known/oauth-protected-resource/mcp"'
    assert rewrite_www_authenticate(external, public, upstream) == external
    own = orjson.dumps(
        {
            "issuer": "http://127.0.0.1:3001",
            "authorization_endpoint": "http://127.0.0.1:3001/authorize",
            "jwks_uri": "https://idp.example.org/jwks",
            "scopes_supported": ["mcp:tools"],
        }
    )
    moved = rewrite_document(own, "/.well-known/oauth-authorization-server", public, upstream)
    assert moved is not None and orjson.loads(moved) == {
        "issuer": "https://mcp.example.com",
        "authorization_endpoint": "https://mcp.example.com/authorize",
        "jwks_uri": "https://idp.example.org/jwks",  # another origin
        "scopes_supported": ["mcp:tools"],
    }
    same = orjson.dumps({"resource": "https://mcp.example.com/mcp"})
    assert rewrite_document(same, "/.well-known/oauth-protected-resource/mcp", public, upstream) is None
    assert rewrite_document(b"not json", "/.well-known/oauth-protected-resource", public, upstream) is None


@pytest.mark.anyio
async def test_a_metadata_document_that_arrives_in_pieces_is_rewritten_whole() -> None:
    document = orjson.dumps({"resource": "http://10.0.0.7:3001/mcp", "authorization_servers": ["https://idp.example"]})

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        for piece in (document[:20], document[20:]):  # two writes, apart in time: two reads upstream-side
            await send({"type": "http.response.body", "body": piece, "more_body": True})
            await anyio.sleep(0.05)
        await send({"type": "http.response.body", "body": b""})

    with serve(app) as up, proxy_for(up + "/mcp", _public("https://mcp.example.com")) as px:
        async with httpx.AsyncClient(timeout=10) as http:
            answer = await http.get(px + "/.well-known/oauth-protected-resource/mcp")
    assert answer.json() == {
        "resource": "https://mcp.example.com/mcp",
        "authorization_servers": ["https://idp.example"],
    }


def test_every_forwarding_spelling_is_dropped_and_a_trusted_chain_is_kept_whole() -> None:
    forged = [
        (b"x-forwarded-prefix", b"/admin"),
        (b"true-client-ip", b"6.6.6.6"),
        (b"x-original-url", b"/admin"),
        (b"x_forwarded_for", b"6.6.6.6"),  # WSGI servers read it as X-Forwarded-For
        (b"x-request-id", b"kept"),
    ]
    assert ForwardingPolicy().apply(list(forged), "203.0.113.9", "http", "h") == [(b"x-request-id", b"kept")]
    lb = ForwardingPolicy(add=True, trusted=parse_networks(["127.0.0.1"]))
    lines = [(b"x-forwarded-for", b"1.1.1.1"), (b"x-forwarded-for", b"2.2.2.2"), (b"forwarded", b"for=1.1.1.1")]
    out = dict(lb.apply(lines, "127.0.0.1", "http", "h"))
    assert out[b"x-forwarded-for"] == b"1.1.1.1, 2.2.2.2, 127.0.0.1"
    assert out[b"forwarded"] == b"for=1.1.1.1, for=127.0.0.1;proto=http;host=h"


@pytest.mark.anyio
async def test_a_metadata_url_on_a_public_origin_of_its_own_is_left_alone() -> None:
    """An upstream whose protected-resource metadata lives on a host of its own (issue 22): the
    challenge reaches the client as the upstream wrote it; one naming the upstream itself moves."""
    external = b'Bearer resource_metadata="https://auth.example.org/.well-known/oauth-protected-resource/mcp"'

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        own = (
            b'Bearer resource_metadata="http://%s/.well-known/oauth-protected-resource/mcp"'
            % dict(scope["headers"])[b"host"]
        )
        challenge = external if scope["path"] == "/mcp" else own
        headers = [(b"www-authenticate", challenge), (b"content-length", b"0")]
        await send({"type": "http.response.start", "status": 401, "headers": headers})
        await send({"type": "http.response.body", "body": b""})

    public = "https://mcp.example.com"
    with serve(guarded) as up, proxy_for(up + "/mcp", _public(public)) as px:
        async with httpx.AsyncClient(timeout=10) as http:
            elsewhere = await http.post(px + "/mcp", content=b"{}", headers=HEADERS)
            itself = await http.post(px + "/other", content=b"{}", headers=HEADERS)
    assert elsewhere.status_code == 401 and elsewhere.headers["www-authenticate"].encode() == external
    assert itself.headers["www-authenticate"] == (
        f'Bearer resource_metadata="{public}/.well-known/oauth-protected-resource/mcp"'
    )
