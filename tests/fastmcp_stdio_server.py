"""The FastMCP server of ``tests/test_fastmcp_wire.py`` over stdio (FastMCP's default transport), as a
host would start it: ``python tests/fastmcp_stdio_server.py``."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.test_fastmcp_wire import fixture_server

if __name__ == "__main__":
    fixture_server().run(show_banner=False)
