"""The built-in demo as a benchmark file: `corral run examples/demo.py` (or `corral demo`).

`benchmark` is a function of no arguments returning a `corral.Benchmark`,
which `corral run` accepts as well as a Benchmark itself. It starts the
demo's scripted models on 127.0.0.1 (a daemon thread that ends with the
process) and points the demo's ToolAgents at them.
"""

from corral import Benchmark
from corral.demo import DemoModel, build_demo
from corral.testing import FakeChatServer


def benchmark() -> Benchmark:
    server = FakeChatServer(DemoModel(latency=1.0)).start()
    return build_demo(server.url, latency=1.0, api_key="")
