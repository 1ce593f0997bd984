"""A server on the Python SDK's own ``MCPServer`` (``mcp`` 2.x), over stdio: a Pydantic model with the
field fault users write (``name: str = None``) and a plain ``int`` return, with field data."""

from __future__ import annotations

import pydantic
from mcp.server.mcpserver import MCPServer


class Person(pydantic.BaseModel):
    id: int
    name: str = None  # type: ignore[assignment]  # the fault, as users write it
    city: str = "Z\u00fcrich \u2713"
    balance: float = 12.5


server = MCPServer("mcpserver-fixture")


@server.tool()
def lookup(id: int) -> Person:
    """Find a person (no name known)."""
    return Person(id=id)


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


if __name__ == "__main__":
    server.run("stdio")
