"""prfaas-plan: capacity planner for cross-datacenter prefill/decode LLM serving.

The package is organised as a pipeline (see README): profiles -> model arithmetic -> per-instance
performance -> layout -> throughput model / optimizer / latency -> report. Every public function takes
and returns plain data (frozen dataclasses, numpy arrays) with units in the names or docstrings.
"""

__version__ = "0.1.0"
