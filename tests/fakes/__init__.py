"""Fakes the tests (and bench/bench_router.py) run in place of real servers: fake_engine.py, a fake vLLM
engine that speaks the P/D request protocol. Not shipped: nothing in operator/ imports from here."""
