"""``mcp-normalizer check``: tell a server's authors what the proxy would repair, so they can fix it.

Modules, one job each: :mod:`~mcp_normalizer.check.client` (a raw MCP client), :mod:`~mcp_normalizer.check.auditor`
(the rules in report-only mode, collecting findings), :mod:`~mcp_normalizer.check.faults` (what each fault
kind breaks), :mod:`~mcp_normalizer.check.replay` (audit a capture offline), :mod:`~mcp_normalizer.check.report`
(table and JSON) and :mod:`~mcp_normalizer.check.command` (the command line).
"""

from __future__ import annotations

from .auditor import Audit, Auditor, Finding
from .command import audit_capture, audit_server, main

__all__ = ["Audit", "Auditor", "Finding", "audit_capture", "audit_server", "main"]
