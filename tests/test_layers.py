"""The package's layers hold: a module imports only from its own layer or the layers below it.

From the bottom: the base modules (``types``, ``errors``), ``wire/``, ``engine/`` with the declared
settings it reads (``keys``, ``config``: the rule configuration is the engine's input), ``ops/``,
``hop/``, and the entry points on top (the middleware, the app, the command, ``check/``,
``demo/``). Inside the engine, the rules are pure: they import the wire, the schemas and the
settings' declarations, never the engine's drivers. Each subpackage's docstring says the same in
words. Imports under ``if TYPE_CHECKING:`` count too, but for the exceptions named here, each with
its reason."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from .support import ROOT

pytestmark = pytest.mark.pure

PACKAGE = ROOT / "mcp_normalizer"

#: Bottom first: (layer, the module prefixes it holds). A module belongs to the first layer
#: whose prefix it matches, most specific prefixes first within the search below.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("base", ("types", "errors")),
    ("wire", ("wire",)),
    ("engine", ("engine", "keys", "config")),
    ("ops", ("ops",)),
    ("hop", ("hop",)),
    ("entry", ("middleware", "app", "cli", "arguments", "check", "demo", "__init__", "__main__")),
]

#: Imports that point up, each only for a type annotation (under ``TYPE_CHECKING``).
ANNOTATION_ONLY = {
    # The rewrite log counts into the metrics it is handed; the engine never builds them.
    ("engine.audit", "ops.metrics"),
}
#: What a rule may import of the engine beside the rules: the schema validators it judges with.
RULES_MAY_IMPORT = ("engine.rules", "engine.schema", "engine.typed")
#: ... and for annotations only, the tool entry a rule is handed.
RULES_ANNOTATE_WITH = ("engine.catalog",)


def layer_of(module: str) -> int:
    """The index in :data:`LAYERS` of a module named relative to the package (``wire.sse``)."""
    best: tuple[int, int] | None = None  # (prefix length, layer)
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if module == prefix or module.startswith(prefix + "."):
                if best is None or len(prefix) > best[0]:
                    best = (len(prefix), index)
    assert best is not None, f"mcp_normalizer.{module} is in no layer: add it to LAYERS"
    return best[1]


def modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        if "node_modules" in path.parts:
            continue
        parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
        if parts[-1] == "__init__" and len(parts) > 1:
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def imports(module: str, path: Path) -> list[tuple[str, bool]]:
    """The package modules ``module`` imports: (name relative to the package, under TYPE_CHECKING)."""
    is_package = path.name == "__init__.py"
    here = module.split(".") if is_package else module.split(".")[:-1]
    if module == "__init__":
        here = []
    found: list[tuple[str, bool]] = []

    def visit(node: ast.AST, typing_only: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                for statement in child.body:
                    visit_statement(statement, True)
                for statement in child.orelse:
                    visit_statement(statement, typing_only)
            else:
                visit_statement(child, typing_only)

    def visit_statement(node: ast.AST, typing_only: bool) -> None:
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - (node.level - 1)] if node.level > 1 else here
                target = [*base, *(node.module.split(".") if node.module else [])]
            elif node.module and (node.module == "mcp_normalizer" or node.module.startswith("mcp_normalizer.")):
                target = node.module.split(".")[1:]
            else:
                target = None
            if target is not None:
                if node.module is None or not target:
                    found.extend((".".join([*target, alias.name]), typing_only) for alias in node.names)
                else:
                    found.append((".".join(target), typing_only))
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names if alias.name.startswith("mcp_normalizer.")]
            found.extend((name.removeprefix("mcp_normalizer."), typing_only) for name in names)
        visit(node, typing_only)

    visit(ast.parse(path.read_text(encoding="utf-8")), False)
    return found


def test_every_module_is_in_a_layer_and_imports_only_downward() -> None:
    known = modules()
    upward = []
    for module, path in sorted(known.items()):
        mine = layer_of(module)
        for target, typing_only in imports(module, path):
            if target not in known and target.rsplit(".", 1)[0] in known:
                target = target.rsplit(".", 1)[0]  # from .x import name: the module x
            if layer_of(target) > mine and not (typing_only and (module, target) in ANNOTATION_ONLY):
                upward.append(f"{module} ({LAYERS[mine][0]}) imports {target} ({LAYERS[layer_of(target)][0]})")
    assert upward == []


def test_the_rules_import_no_driver_of_the_engine() -> None:
    known = modules()
    reached = []
    for module, path in sorted(known.items()):
        if not module.startswith("engine.rules"):
            continue
        for target, typing_only in imports(module, path):
            if not target.startswith("engine.") or target.startswith(RULES_MAY_IMPORT):
                continue
            if not (typing_only and target.startswith(RULES_ANNOTATE_WITH)):
                reached.append(f"{module} imports {target}")
    assert reached == []


def test_the_layer_reader_sees_the_imports_it_judges() -> None:
    """The reader is not vacuous: it finds the relative, absolute and TYPE_CHECKING imports."""
    known = modules()
    assert len(known) > 80
    front = dict(imports("hop.front", known["hop.front"]))
    assert front["ops.refusals"] is False and front["wire.hosts"] is False
    audit = dict(imports("engine.audit", known["engine.audit"]))
    assert audit["ops.metrics"] is True
    assert layer_of("config") == layer_of("engine.transform") > layer_of("wire.jsoncodec") > layer_of("errors")
    rules = dict(imports("engine.rules.base", known["engine.rules.base"]))
    assert rules["engine.catalog"] is True and rules["keys"] is False
    assert layer_of("hop.forward") > layer_of("ops.metrics") > layer_of("engine.scopes") > layer_of("wire.sse")
