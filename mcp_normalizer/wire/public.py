"""The URL clients dial, in the upstream's OAuth metadata (``public_url``); pure, no I/O.

An OAuth-protected MCP server advertises where its protected-resource metadata is (RFC 9728
section 5.1: ``WWW-Authenticate: Bearer resource_metadata="..."`` on a 401) and, in that document,
its ``resource`` identifier. Behind the proxy it knows itself by an internal URL; strict clients
(the TS client 2.x) refuse metadata whose ``resource`` is not the URL they dialled, and cannot
reach an internal metadata URL anyway.

With ``public_url`` set (``scheme://host[:port]``, the origin clients dial), the proxy rewrites:

- in ``WWW-Authenticate`` headers, the origin of a ``resource_metadata`` URL on the upstream's own
  origin or on an internal one (:func:`internal`: how the server may know itself inside its
  network), to the public origin (the document is served through the proxy at the same path); a
  URL on a public origin (a metadata host of its own) is left alone;
- in ``/.well-known/oauth-protected-resource*`` documents, the origin of ``resource`` to the public
  origin, and every other URL on the upstream's own origin;
- in ``/.well-known/oauth-authorization-server*`` and ``/.well-known/openid-configuration*``
  documents (an upstream that is its own authorization server), every URL on the upstream's own
  origin (``issuer`` included, so RFC 8414 section 3.3's issuer check holds).

URLs of other origins (an external authorization server) are left alone.
"""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

from ..errors import DecodeError
from ..types import JSON
from .jsoncodec import dumps, loads

RESOURCE_METADATA = "/.well-known/oauth-protected-resource"
SERVER_METADATA = ("/.well-known/oauth-authorization-server", "/.well-known/openid-configuration")
#: The largest metadata document rewritten; a larger one passes as it is.
MAX_DOCUMENT_BYTES = 256 * 1024

_METADATA_PARAM = re.compile(rb'(resource_metadata\s*=\s*"?)([a-zA-Z][a-zA-Z0-9+.-]*://[^/"\s,]+)', re.IGNORECASE)


def origin_of(url: str) -> str:
    """``scheme://host[:port]`` of ``url``, lower-cased."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


def rewrites_document(path: str) -> bool:
    """True for the metadata paths whose documents :func:`rewrite_document` rewrites."""
    return path.startswith(RESOURCE_METADATA) or path.startswith(SERVER_METADATA)


def internal(origin: str) -> bool:
    """True when ``origin`` names a host inside a private network: a loopback, private or
    link-local address, a name without a dot (``upstream``, a compose service), or one under
    ``.local``, ``.internal``, ``.localhost`` or ``.cluster.local`` (a Kubernetes service)."""
    host = (urlsplit(origin).hostname or "").lower()
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return "." not in host or host.endswith((".local", ".internal", ".localhost", ".cluster.local"))
    return address.is_private or address.is_loopback or address.is_link_local


def rewrite_www_authenticate(value: bytes, public_origin: str, upstream_origin: str) -> bytes:
    """A ``WWW-Authenticate`` value with each ``resource_metadata`` URL on ``upstream_origin`` or
    on an :func:`internal` origin moved to ``public_origin``; one on a public origin (an external
    metadata host) is left alone."""
    upstream = upstream_origin.lower()

    def moved(match: re.Match[bytes]) -> bytes:
        found = match.group(2).decode("latin-1").lower()
        if found != upstream and not internal(found):
            return match.group(0)
        return match.group(1) + public_origin.encode()

    return _METADATA_PARAM.sub(moved, value)


def rewrite_document(body: bytes, path: str, public_origin: str, upstream_origin: str) -> bytes | None:
    """The metadata document ``body`` served at ``path``, its URLs moved to ``public_origin``.

    Returns:
        The new document, or ``None`` when nothing changes or ``body`` is not a JSON object
        (it then passes untouched).
    """
    if len(body) > MAX_DOCUMENT_BYTES:
        return None
    try:
        document = loads(body)
    except DecodeError:
        return None
    if not isinstance(document, dict):
        return None
    upstream = upstream_origin.lower()
    changed = False

    def moved(value: JSON, always: bool) -> JSON:
        nonlocal changed
        if isinstance(value, str) and "://" in value:
            if always or origin_of(value) == upstream:
                new = public_origin + value[len(origin_of(value)) :]
                changed |= new != value
                return new
            return value
        if isinstance(value, list):
            return [moved(item, False) for item in value]
        if isinstance(value, dict):
            return {key: moved(item, False) for key, item in value.items()}
        return value

    resource_document = path.startswith(RESOURCE_METADATA)
    out = {key: moved(value, resource_document and key == "resource") for key, value in document.items()}
    if not changed:
        return None
    try:
        return dumps(out)
    except DecodeError:
        return None
