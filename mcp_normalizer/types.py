"""ASGI and JSON type aliases shared by every module (ASGI 3.0, HTTP and lifespan scopes)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, TypeAlias

Scope: TypeAlias = MutableMapping[str, Any]
Message: TypeAlias = MutableMapping[str, Any]
Receive: TypeAlias = Callable[[], Awaitable[Message]]
Send: TypeAlias = Callable[[Message], Awaitable[None]]
ASGIApp: TypeAlias = Callable[[Scope, Receive, Send], Awaitable[None]]

#: Raw ASGI header list: lower-cased names and values as bytes, in wire order.
RawHeaders: TypeAlias = list[tuple[bytes, bytes]]

#: Any value a JSON document can hold once decoded.
JSON: TypeAlias = Any
#: A decoded JSON object.
JSONObject: TypeAlias = dict[str, Any]
