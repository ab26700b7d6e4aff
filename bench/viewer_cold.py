"""The viewer's cold headline on a store already written: ``corral view`` started, then
``/api/benchmark?id=ID&wait=1`` (pass@k and its intervals) asked at once.

    PYTHONPATH=src python bench/viewer_cold.py STORE BENCHMARK_ID [REPEATS]

Prints, per start: the seconds to the "serving" line, the request's seconds, and the
server's CPU seconds (user + sys, from /proc: imports included), with the load
average (wall times on a shared machine follow it; CPU seconds much less). Build
the store once with ``bench/viewer_stores.big_store`` (as ``bench/report_scale.py``
does) and compare trees by running this from each, alternating.
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.request

from viewer_stores import view_process  # bench/, beside this file


def cold(store: str, benchmark_id: str) -> str:
    start = time.perf_counter()
    with view_process(store) as (process, url):
        serving = time.perf_counter()
        with urllib.request.urlopen(f"{url}api/benchmark?id={benchmark_id}&wait=1") as r:
            body = json.loads(r.read())
        answered = time.perf_counter()
        with open(f"/proc/{process.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    assert body["ready"] and body["scores"]["pass_at_k"], body.keys()
    return (
        f"{benchmark_id}: started {serving - start:.2f} s, headline {answered - serving:.2f} s, "
        f"server cpu {cpu:.2f} s, load {os.getloadavg()[0]:.1f}"
    )


def main() -> None:
    store, benchmark_id = sys.argv[1], sys.argv[2]
    for _ in range(int(sys.argv[3]) if len(sys.argv) > 3 else 1):
        print(cold(store, benchmark_id), flush=True)


if __name__ == "__main__":
    main()
