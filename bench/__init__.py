"""The agentledger benchmark: every system on one deterministic workload, side by side.

Run ``python -m bench`` (``--quick`` for a short run). See docs/benchmarks.md for the results and
how they were measured.
"""
