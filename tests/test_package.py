"""The wheel people install: one top-level import package, ``mcp_normalizer`` (PyPI's proxy.py owns
``proxy``), with its typing marker, its default config and the ``mcp-normalizer`` command."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from .support import ROOT


def test_the_wheel_holds_mcp_normalizer_and_nothing_else_at_the_top(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(tmp_path), str(ROOT)],
        check=True,
        timeout=300,
    )
    (wheel,) = tmp_path.glob("mcp_normalizer-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/", 1)[0] for name in names}
    (info,) = (top for top in tops if top.endswith(".dist-info"))
    assert tops == {"mcp_normalizer", info}
    assert {"mcp_normalizer/py.typed", "mcp_normalizer/normalizer.toml", "mcp_normalizer/cli.py"} <= set(names)
    shipped = zipfile.ZipFile(wheel).read("mcp_normalizer/normalizer.toml").decode()
    assert shipped == (ROOT / "config" / "normalizer.toml").read_text(encoding="utf-8")  # the file, not a link
    entry_points = zipfile.ZipFile(wheel).read(f"{info}/entry_points.txt").decode()
    assert "mcp-normalizer = mcp_normalizer.cli:main" in entry_points
    assert f"{info}/licenses/LICENSE" in names
    metadata = zipfile.ZipFile(wheel).read(f"{info}/METADATA").decode()
    assert "License-Expression: MIT" in metadata and "Classifier: Typing :: Typed" in metadata


def test_the_version_is_defined_once() -> None:
    import tomllib

    import mcp_normalizer

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    assert mcp_normalizer.__version__ == declared
