"""The wheel people install: one top-level import package, ``mcp_normalizer`` (PyPI's proxy.py owns
``proxy``), with its typing marker, its default config and the ``mcp-normalizer`` command."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from .support import ROOT, free_port

pytestmark = pytest.mark.wire


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel ``pip wheel`` builds from the checkout."""
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out), str(ROOT)],
        check=True,
        timeout=300,
    )
    (built,) = out.glob("mcp_normalizer-*.whl")
    return built


def test_the_wheel_holds_mcp_normalizer_and_nothing_else_at_the_top(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/", 1)[0] for name in names}
    (info,) = (top for top in tops if top.endswith(".dist-info"))
    assert tops == {"mcp_normalizer", info}
    packaged = {
        "mcp_normalizer/py.typed",
        "mcp_normalizer/normalizer.toml",
        "mcp_normalizer/interventions.toml",
        "mcp_normalizer/hosts.toml",
    }
    assert packaged <= set(names)
    shipped = zipfile.ZipFile(wheel).read("mcp_normalizer/normalizer.toml").decode()
    assert shipped == (ROOT / "config" / "normalizer.toml").read_text(encoding="utf-8")  # the file, not a link
    entry_points = zipfile.ZipFile(wheel).read(f"{info}/entry_points.txt").decode()
    assert "mcp-normalizer = mcp_normalizer.cli:main" in entry_points
    assert f"{info}/licenses/LICENSE" in names
    metadata = zipfile.ZipFile(wheel).read(f"{info}/METADATA").decode()
    assert "License-Expression: MIT" in metadata and "Classifier: Typing :: Typed" in metadata
    demo = {"node/client.mjs", "node/package.json", "node/package-lock.json"}
    assert {f"mcp_normalizer/demo/{name}" for name in demo} <= set(names)
    assert not any("node_modules" in name for name in names)  # the npm clients are installed, not shipped


def test_the_installed_wheel_runs_its_demo_outside_a_checkout(wheel: Path, tmp_path: Path) -> None:
    """The wheel alone (its dependencies from this environment, no checkout on the path): the demo
    installs the npm clients into the user's cache once, then compares the clients as in a checkout."""
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_NORMALIZER_")}
    env |= {"PYTHONPATH": str(site), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    where = subprocess.run(
        [sys.executable, "-c", "import mcp_normalizer; print(mcp_normalizer.__file__)"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert where.stdout.startswith(str(site))  # the wheel's files, not the checkout's
    argv = [sys.executable, "-m", "mcp_normalizer", "demo", "--once", "--port", str(free_port())]
    done = subprocess.run(
        [*argv, "--upstream-port", str(free_port())], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert f"Installing the TS MCP clients once (npm ci) into {tmp_path / 'cache'}" in done.stdout
    for client in ("TS SDK 1.32.2", "TS client 2.4.0", "Python mcp 2.3.0"):
        assert client in done.stdout
    proxied = [line for line in done.stdout.splitlines() if line.strip().startswith("proxied:")]
    assert len(proxied) == 12 and not any("THROWS" in line for line in proxied)


def test_the_version_is_defined_once() -> None:
    import tomllib

    import mcp_normalizer

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    assert mcp_normalizer.__version__ == declared


def test_no_module_of_the_package_imports_another_that_imports_it_back() -> None:
    """The package's import graph (top-level ``from .x import y`` statements; imports inside
    functions count too, so that no cycle hides behind a lazy import) has no cycle."""
    import ast

    package = ROOT / "mcp_normalizer"
    modules = {}
    for path in package.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        here = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = here.split(".")[: len(here.split(".")) - node.level + 1]
                target = ".".join([*base, *([node.module] if node.module else [])])
                candidates = ([target] if node.module else []) + [f"{target}.{alias.name}" for alias in node.names]
                graph[name] |= {c for c in candidates if c in modules and c != name}

    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), [start]
        while todo:
            node = todo.pop()
            if node == goal:
                return True
            if node not in seen:
                seen.add(node)
                todo.extend(graph[node])
        return False

    cycles = sorted((a, b) for a in graph for b in graph[a] if reaches(b, a))
    # the package's __init__ re-exports its API: a module importing a sibling by "from . import x" is not a cycle
    assert [(a, b) for a, b in cycles if "mcp_normalizer" not in (a, b)] == []
