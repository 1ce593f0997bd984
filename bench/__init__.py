"""Benchmark and soak commands for mcp-normalizer (``bench/bench.py``, ``bench/soak.py``).

Modules: :mod:`bench.fixture` (the tools and their expected results), :mod:`bench.upstream` (the
fixture upstream, run in its own process), :mod:`bench.client` (a raw HTTP/1.1 client and MCP
session), :mod:`bench.procs` (processes and ``/proc``), :mod:`bench.load` (closed-loop load in
worker processes), :mod:`bench.report` (statistics and the printed table), :mod:`bench.verify`
(the soak's per-response checks).
"""
