"""The wire: bytes and JSON-RPC messages as they travel, with no MCP policy; sans-IO.

Owns the JSON codec that keeps every number's spelling (:mod:`.jsoncodec`), JSON-RPC envelopes,
ids and batches (:mod:`.jsonrpc`), the protocol eras and what each version means (:mod:`.eras`,
the only place a version is read), the SSE splitter (:mod:`.sse`, ``feed``/``flush``), newline
framing for stdio (:mod:`.lines`), JSON pointers (:mod:`.pointer`), request heads and bodies
(:mod:`.heads`, :mod:`.body`), the proxy's own whole responses (:mod:`.responses`), and the
header policies a hop applies: ``Host``/``Origin`` (:mod:`.hosts`), ``Forwarded`` (:mod:`.forwarded`)
and the public URL in OAuth metadata (:mod:`.public`).

May import: :mod:`mcp_normalizer.types`, :mod:`mcp_normalizer.errors`, and itself. Nothing here
knows of rules, tools, metrics or sockets (``tests/test_layers.py``).
"""
