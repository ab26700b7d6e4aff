"""The floor of wall / ideal with one durable write inside each trial, no runner at all:
a writer thread beside the event loop (as Corral's SQLite store has), a writer
process, or writes on the loop's own thread.

    python bench/ack_floor.py [--trials 20000] [--latency 0.01] [--parallel 64]
        [--cpu 100 140] [--writer thread process inline]

As `loop_floor.py`: ``--parallel`` workers on one asyncio loop take trials off a
shared count; a trial awaits ``sleep(latency)`` (the model call), holds the loop
for 70 % of ``c`` microseconds, hands one row to the writer and awaits its
acknowledgement (the action's, before its tool runs), then holds the loop for the
rest of ``c`` and hands over a second row it does not wait for. The writer takes
what was handed over as one batch and writes it in one SQLite transaction
(``synchronous=NORMAL``, WAL), one batch after another:

- ``thread``: a thread woken through a condition, as `corral.store._batching`'s
  `WriterThread`; it wakes the batch's waiters with ``call_soon_threadsafe``. Each
  time it has let go of the GIL (to wait, or in SQLite's calls) it takes it back only
  when the loop's thread lets go (at its next poll, or forced at the switch interval);
- ``process``: a child process, sent each batch at the loop's next turn over a socket
  pair, that writes and answers with the batch's number, read by the loop's own poll;
- ``inline``: the loop writes each batch itself at its next turn (no thread to wake,
  but the loop holds SQLite's work: a row here costs a few microseconds, where a
  Corral trial's five commits and head cost its writer thread about 40).

Printed per ``c`` and writer: wall against the ideal ``N x L / P``, the median and
mean acknowledgement, and the loop's CPU per trial.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import pickle
import socket
import sqlite3
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS c (t TEXT, s INT, p TEXT, a REAL, PRIMARY KEY (t, s)) WITHOUT ROWID"
)
PAYLOAD = '{"kind":"action","name":"step","args":{"n":1},"worked":0.0123}'
FRAME = struct.Struct("!I")


def connect(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute(SCHEMA)
    return conn


def write(conn: sqlite3.Connection, rows: list[tuple[Any, ...]]) -> None:
    conn.execute("BEGIN IMMEDIATE")
    conn.executemany("INSERT INTO c VALUES (?, ?, ?, ?)", rows)
    conn.execute("COMMIT")


def burn(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


class ThreadWriter:
    def __init__(self, loop: asyncio.AbstractEventLoop, path: str) -> None:
        self.loop = loop
        self.conn = connect(path)
        self.lock = threading.Lock()
        self.wake = threading.Condition(self.lock)
        self.batch: tuple[list[tuple[Any, ...]], asyncio.Event] | None = None
        self.stopping = False
        self.thread = threading.Thread(target=self.main, daemon=True)
        self.thread.start()

    def put(self, row: tuple[Any, ...]) -> asyncio.Event:
        with self.lock:
            if self.batch is None:
                self.batch = ([], asyncio.Event())
                self.wake.notify()
            self.batch[0].append(row)
            return self.batch[1]

    def main(self) -> None:
        while True:
            with self.lock:
                while self.batch is None and not self.stopping:
                    self.wake.wait()
                if self.batch is None:
                    return
                (rows, done), self.batch = self.batch, None
            write(self.conn, rows)
            self.loop.call_soon_threadsafe(done.set)

    def close(self) -> None:
        with self.lock:
            self.stopping = True
            self.wake.notify()
        self.thread.join()
        self.conn.close()


class TurnBatches:
    """What is handed over in one turn of the loop, as one batch, handed on at its end
    (`hand_on`, each writer's own)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.open: tuple[list[tuple[Any, ...]], asyncio.Event] | None = None

    def put(self, row: tuple[Any, ...]) -> asyncio.Event:
        if self.open is None:
            self.open = ([], asyncio.Event())
            self.loop.call_soon(self.hand_on)
        self.open[0].append(row)
        return self.open[1]

    def take(self) -> tuple[list[tuple[Any, ...]], asyncio.Event] | None:
        taken, self.open = self.open, None
        return taken

    def hand_on(self) -> None:
        raise NotImplementedError


class InlineWriter(TurnBatches):
    """Writes on the event loop's own thread, once a turn: no other thread to wake."""

    def __init__(self, loop: asyncio.AbstractEventLoop, path: str) -> None:
        super().__init__(loop)
        self.conn = connect(path)

    def hand_on(self) -> None:
        taken = self.take()
        if taken is not None:
            rows, done = taken
            write(self.conn, rows)
            done.set()

    def close(self) -> None:
        self.hand_on()
        self.conn.close()


class ProcessWriter(TurnBatches):
    def __init__(self, loop: asyncio.AbstractEventLoop, path: str) -> None:
        super().__init__(loop)
        ours, theirs = socket.socketpair()
        self.child = subprocess.Popen(
            [sys.executable, __file__, "--child", path, str(theirs.fileno())],
            pass_fds=(theirs.fileno(),),
        )
        theirs.close()
        self.sock = ours
        # Its Python started and its database open before the clock starts.
        assert ours.recv(FRAME.size) == FRAME.pack(0), "the writer process did not start"
        self.sent: dict[int, asyncio.Event] = {}
        self.number = 0
        self.received = b""
        loop.add_reader(ours.fileno(), self.acknowledged)

    def hand_on(self) -> None:
        taken = self.take()
        if taken is None:  # sent as the writer closed
            return
        rows, done = taken
        self.number += 1
        self.sent[self.number] = done
        data = pickle.dumps((self.number, rows), protocol=5)
        self.sock.sendall(FRAME.pack(len(data)) + data)

    def acknowledged(self) -> None:
        self.received += self.sock.recv(65536)
        while len(self.received) >= FRAME.size:
            (number,) = FRAME.unpack_from(self.received)
            self.received = self.received[FRAME.size :]
            self.sent.pop(number).set()

    def close(self) -> None:
        """Send what is still open; the child writes it all and ends at the socket's end."""
        self.hand_on()
        self.loop.remove_reader(self.sock.fileno())
        self.sock.shutdown(socket.SHUT_WR)
        self.child.wait()
        self.sock.close()


WRITERS: dict[str, type[ThreadWriter | ProcessWriter | InlineWriter]] = {
    "thread": ThreadWriter,
    "process": ProcessWriter,
    "inline": InlineWriter,
}


def child(path: str, fd: int) -> None:
    """The writer process: batches in, their numbers out once written."""
    conn = connect(path)
    sock = socket.socket(fileno=fd)
    sock.sendall(FRAME.pack(0))  # ready
    received = b""
    while data := sock.recv(1 << 20):
        received += data
        done = []
        while len(received) >= FRAME.size:
            (size,) = FRAME.unpack_from(received)
            if len(received) < FRAME.size + size:
                break
            number, rows = pickle.loads(received[FRAME.size : FRAME.size + size])
            received = received[FRAME.size + size :]
            write(conn, rows)
            done.append(FRAME.pack(number))
        if done:
            sock.sendall(b"".join(done))


async def run(args: argparse.Namespace, writer_kind: str, cpu: float, path: str) -> None:
    loop = asyncio.get_running_loop()
    writer = WRITERS[writer_kind](loop, path)
    acks: list[float] = []
    left = args.trials

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            task = f"t{left}"
            await asyncio.sleep(args.latency)
            burn(cpu * 0.7)
            handed = time.perf_counter()
            await writer.put((task, 1, PAYLOAD, time.time())).wait()
            acks.append(time.perf_counter() - handed)
            burn(cpu * 0.3)
            writer.put((task, 2, PAYLOAD, time.time()))

    start, loop_cpu = time.perf_counter(), time.thread_time()
    await asyncio.gather(*(worker() for _ in range(args.parallel)))
    wall, loop_cpu = time.perf_counter() - start, time.thread_time() - loop_cpu
    writer.close()
    ideal = args.trials * args.latency / args.parallel
    print(
        f"c = {cpu * 1e6:4.0f} us, {writer_kind:7}: wall / ideal {wall / ideal:.2f}; "
        f"acknowledgement median {statistics.median(acks) * 1e3:.2f} ms, mean "
        f"{statistics.fmean(acks) * 1e3:.2f} ms; loop CPU {loop_cpu / args.trials * 1e6:.0f} us "
        "a trial"
    )


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2], int(sys.argv[3]))
        return
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trials", type=int, default=20_000)
    parser.add_argument("--latency", type=float, default=0.01)
    parser.add_argument("--parallel", type=int, default=64)
    parser.add_argument("--cpu", type=float, nargs="+", default=[100, 140], help="microseconds")
    parser.add_argument("--writer", nargs="+", choices=WRITERS, default=list(WRITERS))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for cpu in args.cpu:
            for kind in args.writer:
                path = str(Path(tmp) / f"{kind}-{cpu:g}.db")
                asyncio.run(run(args, kind, cpu * 1e-6, path))
                for suffix in ("", "-wal", "-shm"):
                    if os.path.exists(path + suffix):
                        os.remove(path + suffix)


if __name__ == "__main__":
    main()
