"""The engine: what the proxy knows about MCP and does to its messages; sans-IO.

Owns the rules (:mod:`.rules`: pure functions from a message and its tool to rewrites), the tool
catalogs and per-scope state (:mod:`.catalog`, :mod:`.scopes`), schemas and their validators
(:mod:`.schema`, :mod:`.typed`), the normalizer that runs the rules on one message
(:mod:`.normalize`), the transformer that drives it over a response's JSON or SSE body
(:mod:`.transform`, with what it watches in :mod:`.exchange` and the ``tools/list`` path in
:mod:`.tools_list`), request rewriting (:mod:`.request_rewrite`), learning (:mod:`.lessons`), the
known-servers table (:mod:`.interventions`), the rewrite log (:mod:`.audit`), traffic capture
(:mod:`.capture`) and the stdio session core (:mod:`.stdio_session`). The middleware and every
hop drive the same engine.

May import: :mod:`mcp_normalizer.wire`, the base modules (``types``, ``errors``), and the declared
settings (:mod:`mcp_normalizer.config`, :mod:`mcp_normalizer.keys`), which the rules sit below:
:mod:`.rules` imports only the wire and the base. Never the hop, the operations layer or an entry
point (``tests/test_layers.py``).
"""
