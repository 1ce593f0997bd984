"""Rule ``apps_result_meta`` (off by default): a result of an MCP Apps tool carries its tool's UI pointer.

DESIGN section 3, rule 6. An MCP Apps tool names the UI that renders its results in its listing:
``_meta.ui.resourceUri`` (or the deprecated flat ``_meta["ui/resourceUri"]``; MCP Apps,
``_meta.ui`` on the ``Tool``). The spec does not define the pointer on a ``CallToolResult``, but
some hosts and SDKs read it there (mastra, assistant-ui: a de-facto convention, not spec). With this
rule on, a result of such a tool that names no UI of its own (in neither spelling) gets
``_meta.ui.resourceUri`` set to the tool's. The result's other ``_meta`` members, and those of its
``_meta.ui``, are kept. A result whose ``_meta.ui`` is not an object is left alone (a ``_meta``
that is not one is made one first by ``null_members`` or ``meta_keys``, the original kept; with
those off, left alone). Error results get the pointer too. Nothing the server set is overwritten.

Off by default: it adds a member the spec does not define, for the hosts that read it. The
proxy knows a tool's pointer from the tools it listed, or (over HTTP) fetched when a call named an
unknown tool. A result of a tool it does not know, or of a tool without a pointer, passes as it came.
"""

from __future__ import annotations

from ...types import JSONObject
from .base import Mode, ResultContext, Rewrite, Rule

#: The deprecated flat spelling of the pointer (MCP Apps drafts); a result carrying it names its UI.
FLAT_KEY = "ui/resourceUri"


def _point(result: JSONObject, ctx: ResultContext) -> tuple[JSONObject, Rewrite] | None:
    uri = ctx.tool.ui_resource_uri if ctx.tool is not None else None
    if uri is None:
        return None
    meta = result.get("_meta", {})
    if not isinstance(meta, dict) or FLAT_KEY in meta:
        return None
    ui = meta.get("ui", {})
    if not isinstance(ui, dict) or "resourceUri" in ui:
        return None
    out = {**result, "_meta": {**meta, "ui": {**ui, "resourceUri": uri}}}
    reason = "the tool's listing names its UI and the result names none (hosts that read the result's pointer)"
    return out, Rewrite(
        "apps_result_meta", "copied the tool's _meta.ui.resourceUri", ("/_meta/ui/resourceUri",), reason
    )


RULE = Rule(
    "apps_result_meta",
    "apps_result_meta",
    "Off by default. A result of an MCP Apps tool that names no UI gets the tool's _meta.ui.resourceUri "
    "(for hosts that read the pointer on results; a convention, not spec).",
    default=Mode.OFF,
    on_result=_point,
)
