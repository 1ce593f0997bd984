"""The host matrix (issue 38), run once: the proxy never shows a host's model less than the server
does directly, except the known cells below (bugs for issues 39 and 40, each an ``xfail(strict)``
so the list stays true when one is fixed), and ``docs/hosts-model-view.md`` is this run's page.

The matrix and how a cell is judged: :mod:`tests.host_matrix`. Regenerate the page with
``scripts/host-matrix`` when a host, a rule or a fault kind changes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .host_loop import host_command
from .host_matrix import COMMANDS, HOST_CAUSES, PAGE, Matrix, page, run_matrix

pytestmark = pytest.mark.wire

#: The cells (host, fault kind) where the model gets less through the proxy than directly today,
#: and why. The one place they are listed: a cell fixed, or a new one, fails this file.
KNOWN_LESS: dict[tuple[str, str], str] = {}


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory) -> Matrix:
    for command in COMMANDS.values():
        host_command(command)  # skips the module when the hosts are not installed
    return run_matrix(tmp_path_factory.mktemp("matrix"))


def test_no_other_cell_shows_the_model_less_through_the_proxy(matrix: Matrix) -> None:
    unexpected = {cell: why for cell, why in matrix.less().items() if cell not in KNOWN_LESS}
    assert not unexpected, unexpected


@pytest.mark.parametrize(
    "cell", [pytest.param(cell, marks=pytest.mark.xfail(strict=True, reason=why)) for cell, why in KNOWN_LESS.items()]
)
def test_a_known_cell_shows_the_model_no_less_through_the_proxy(matrix: Matrix, cell: tuple[str, str]) -> None:
    assert cell in matrix.cells, f"{cell} is not in the matrix: KNOWN_LESS names a host or kind it has not"
    assert cell not in matrix.less(), matrix.less()[cell]


def test_through_the_proxy_each_host_gets_something_it_did_not_directly(matrix: Matrix) -> None:
    """At least one of each host's own faults is gone through the proxy (the tool kept, the server
    kept, or information of the result reaching the model)."""
    helped = {host for host, _kind in matrix.more()}
    assert helped == set(matrix.hosts), matrix.more()


def test_each_host_cause_names_a_cell_where_the_model_still_misses_something_through_the_proxy(
    matrix: Matrix,
) -> None:
    """A cell explained as the host's own doing (:data:`tests.host_matrix.HOST_CAUSES`) still shows
    the model less than the whole result through the proxy; once it does not, the note goes."""
    for cell in HOST_CAUSES:
        assert cell in matrix.cells, f"{cell} is not in the matrix: HOST_CAUSES names a host or kind it has not"
        proxy = matrix.cells[cell]["proxy"]
        assert proxy.status != "offered" or not proxy.result or proxy.missing, (cell, proxy.cell())


def _without_the_run_line(text: str) -> list[str]:
    """The page's lines without the one that dates the run and says how long it took."""
    return [line for line in text.splitlines() if not line.startswith("Generated on ")]


def test_the_docs_page_is_this_runs_page(matrix: Matrix, tmp_path: Path) -> None:
    generated = page(matrix, "")
    assert _without_the_run_line(PAGE.read_text(encoding="utf-8")) == _without_the_run_line(generated), (
        "docs/hosts-model-view.md is not what the hosts show today: run scripts/host-matrix"
    )
