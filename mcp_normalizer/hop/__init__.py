"""The hop: sockets, upstreams and ASGI plumbing, the parts of the proxy that move bytes.

Owns the listening side (:mod:`.server`: uvicorn's server, sockets and workers; :mod:`.protocol`:
the HTTP/1.1 protocol; :mod:`.guards`: the limits every connection is held to), the front door
(:mod:`.front`: Host/Origin, the head bound, the admin paths), the streaming HTTP forwarder
(:mod:`.forward`) and its HTTP/1.1 client (:mod:`.upstream_http`), the stdio upstream and wrapper
(:mod:`.stdio_upstream`, :mod:`.stdio_wrapper`, :mod:`.child` for the server process), the
``send`` that drives a response through the engine (:mod:`.relay`), the proxy's own
``tools/list`` (:mod:`.tools_fetch`) and the ``list_changed`` announcer (:mod:`.announcer`).

May import: the operations layer, the engine, the wire, the base modules and the settings. Never
an entry point (``tests/test_layers.py``); the middleware, the app and the command sit on top.
"""
