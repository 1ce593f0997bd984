"""ASGI and JSON type aliases shared by every module (ASGI 3.0, HTTP and lifespan scopes)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, NamedTuple, TypeAlias

Scope: TypeAlias = MutableMapping[str, Any]
Message: TypeAlias = MutableMapping[str, Any]
Receive: TypeAlias = Callable[[], Awaitable[Message]]
Send: TypeAlias = Callable[[Message], Awaitable[None]]
ASGIApp: TypeAlias = Callable[[Scope, Receive, Send], Awaitable[None]]

#: The scope key of the listener's hang-up hook (an extension of this project's listener,
#: :mod:`mcp_normalizer.hop.server`): ``scope[HANG_UP](callback)`` has the connection call
#: ``callback()`` if it is lost while the request is being answered, ``scope[HANG_UP](None)`` takes
#: it back. An app learns of a hang-up without a task awaiting ``receive()``; under another server
#: the key is absent and the app watches ``receive()``. A scope made for another request (the
#: proxy's own ``tools/list`` fetch) must not carry it.
HANG_UP = "mcp_normalizer.hang_up"

#: The scope key marking the proxy's own request (its ``tools/list`` fetch), answered to the proxy
#: itself, which reads it at once: the stdio upstream's buffer bounds never cut another client's
#: stream to make room for it, nor cut it (a client's answer may be waiting on it).
OWN_FETCH = "mcp_normalizer.own_fetch"

#: The scope key of the connection a request came on (an extension of this project's listener,
#: :mod:`mcp_normalizer.hop.server`): a dict, the same object for every request of one connection,
#: made when it opens and gone with it, where an app keeps what it knows of the connection (the
#: middleware: the client that named itself on it, :mod:`mcp_normalizer.engine.client_id`). No
#: later connection from the same address and port gets it, and no other client's words make it
#: forget. Under another server the key is absent.
CONNECTION = "mcp_normalizer.connection"

#: Raw ASGI header list: lower-cased names and values as bytes, in wire order.
RawHeaders: TypeAlias = list[tuple[bytes, bytes]]

#: Any value a JSON document can hold once decoded.
JSON: TypeAlias = Any
#: A decoded JSON object.
JSONObject: TypeAlias = dict[str, Any]


class ArgumentKeys(NamedTuple):
    """How a call's argument names go back to the tool's own.

    Attributes:
        names: advertised -> own (every name the tool is advertised under, for any family).
        places: the argument places whose members may carry one (JSON pointers into the
            arguments under the advertised names, ``*`` any item; ``""`` the arguments object).
    """

    names: dict[str, str]
    places: tuple[str, ...] = ("",)
