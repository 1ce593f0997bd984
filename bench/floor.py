"""Run the benchmark's floor: ``../shared/tools/lean_hop.py``, the leanest proxy Python can be,
with this checkout's rule engine (``--normalize``) or without.

::

    python -m bench.floor LEAN_HOP_PATH --upstream URL --port P [--normalize --project .]

lean_hop finds the engine by importing ``<package>.transform`` and looks every other name up
wherever the package keeps it; the transformer lives in ``mcp_normalizer.engine.transform`` (the
package's layers), so that one name is aliased before lean_hop runs. Nothing else is changed:
the floor runs as its author wrote it.
"""

from __future__ import annotations

import importlib
import runpy
import sys


def main(argv: list[str]) -> None:
    """Run the lean hop at ``argv[0]`` with the rest of ``argv`` as its arguments."""
    sys.modules.setdefault("mcp_normalizer.transform", importlib.import_module("mcp_normalizer.engine.transform"))
    sys.argv = [argv[0], *argv[1:]]
    runpy.run_path(argv[0], run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
