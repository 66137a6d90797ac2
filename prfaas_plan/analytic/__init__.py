"""Analytic models of a layout: stage throughput (``throughput``), the threshold/split search
(``search``), linear and integer programs (``lp``), unloaded TTFT (``ttft``) and latency under load
(``latency``). All consume the same layout, length grid and per-instance performance inputs."""
