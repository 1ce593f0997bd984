"""``python -m mcp_normalizer``: the same as the ``mcp-normalizer`` command."""

from .cli import main

raise SystemExit(main())
