"""The built-in demo as a benchmark file: `corral run examples/demo.py` (or `corral demo`).

`build_demo` is a function of no arguments returning a `corral.Benchmark`,
which `corral run` accepts as well as a Benchmark itself.
"""

from corral.demo import build_demo

benchmark = build_demo
