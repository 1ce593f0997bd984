"""Operations: what an operator watches and keeps, around the engine.

Owns the Prometheus metrics (:mod:`.metrics`), OpenTelemetry tracing (:mod:`.tracing`), the JSON
log lines (:mod:`.logs`), the request record and access log (:mod:`.observe`), refusals and their
throttled log (:mod:`.refusals`), the admin endpoints (:mod:`.admin`), and the state that outlives
a request: the shared store in Redis (:mod:`.shared_state`) and the lesson files
(:mod:`.lesson_store`).

May import: the engine, the wire, the base modules and the settings. Never the hop or an entry
point (``tests/test_layers.py``).
"""
