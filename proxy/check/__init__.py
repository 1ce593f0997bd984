"""``mcp-normalizer check``: tell a server's authors what the proxy would repair, so they can fix it.

Modules, one job each: :mod:`~proxy.check.client` (a raw MCP client), :mod:`~proxy.check.auditor`
(the rules in report-only mode, collecting findings), :mod:`~proxy.check.faults` (what each fault
kind breaks), :mod:`~proxy.check.replay` (audit a capture offline), :mod:`~proxy.check.report`
(table and JSON) and :mod:`~proxy.check.command` (the command line).
"""

from __future__ import annotations

from .auditor import Audit, Auditor, Finding
from .command import audit_capture, audit_server, main

__all__ = ["Audit", "Auditor", "Finding", "audit_capture", "audit_server", "main"]
