"""The real executor (DESIGN.md "Executor"): a small torch decoder over a paged KV cache with chunked
prefill, batched decode, GQA and a host-memory tier, driven by the simulator's own scheduler and
policies; calibration of the cost model from its measured steps, and the sim-to-real check.

The ONLY torch user in optsched. This ``__init__`` imports nothing so that torch-free modules
(``config``, ``scale``) stay importable without torch; import submodules directly.
"""

__all__: list[str] = []
