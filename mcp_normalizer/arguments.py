"""The commands' argument parser (no I/O, no heavy imports: ``stdio`` and ``check`` start fast)."""

from __future__ import annotations

import argparse
from typing import NoReturn


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors (``mcp-normalizer: error: ...``) and exit code 2 (the
    commands' parsers: the proxy's in :mod:`mcp_normalizer.cli`, ``stdio``'s, ``check``'s, ``demo``'s)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")
