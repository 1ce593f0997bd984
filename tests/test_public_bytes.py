"""Issue 40's guard: a client that is no host (the Python SDK client's name, or no ``clientInfo``)
gets exactly the bytes it got before the host-aware result rules, for every public fault case.

The golden bodies (``tests/golden/public-bytes.json``) were recorded by ``scripts/public-bytes
--write`` on the code of commit b9dbf53 (:mod:`tests.public_bytes`); a host rule that leaks to
other clients changes a body and fails here.
"""

from __future__ import annotations

import json

import pytest

from .public_bytes import CLIENTS, GOLDEN, record

pytestmark = pytest.mark.wire


def test_a_client_without_a_host_profile_gets_the_bytes_of_before_for_every_public_case() -> None:
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    now = record()
    assert set(now) == set(golden), "the public cases changed: regenerate on purpose (scripts/public-bytes --write)"
    differ = [
        (case, client, method)
        for case, clients in golden.items()
        for client in CLIENTS
        for method, body in clients[client].items()
        if now[case][client][method] != body
    ]
    assert not differ, differ
