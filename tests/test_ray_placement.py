"""Where the Ray executor puts a job: on a host whose long poll goes out anyway, when
that keeps the hosts near balance, and never past ``trials_per_host``."""

from __future__ import annotations

import random

import pytest

from corral.executor._dispatch import _Host, choose


def host(index: int, load: int, *, answered: bool) -> _Host:
    made = _Host.__new__(_Host)  # no actor: placement reads only the jobs and the poll
    made.index = index
    made.jobs = {(index, j): None for j in range(load)}  # type: ignore[misc]
    made.outbox = []
    made.poll = None if answered else object()
    return made


def test_a_host_that_answered_takes_the_job_while_near_the_lightest() -> None:
    polled, answered = host(0, 8, answered=False), host(1, 10, answered=True)
    assert choose([polled, answered], None) is answered
    # More than a quarter above the lightest: the lightest takes it (a submit call).
    polled, answered = host(0, 8, answered=False), host(1, 11, answered=True)
    assert choose([polled, answered], None) is polled
    # Nobody answered: the lightest.
    a, b = host(0, 3, answered=False), host(1, 2, answered=False)
    assert choose([a, b], None) is b
    # Of those that answered, the lightest.
    a, b, c = host(0, 5, answered=True), host(1, 4, answered=True), host(2, 4, answered=False)
    assert choose([a, b, c], None) is b


def test_a_full_host_takes_nothing_even_when_it_answered() -> None:
    polled, answered = host(0, 1, answered=False), host(1, 2, answered=True)
    assert choose([polled, answered], 3) is answered
    assert choose([polled, host(1, 2, answered=True)], 2) is polled


@pytest.mark.parametrize("seed", range(5))
def test_no_host_ever_holds_more_than_trials_per_host(seed: int) -> None:
    rng = random.Random(seed)
    cap = rng.randint(1, 6)
    hosts = [host(i, 0, answered=True) for i in range(rng.randint(2, 5))]
    job = 0
    for _ in range(3000):
        total = sum(len(h.jobs) for h in hosts)
        event = rng.random()
        if event < 0.5 and total < cap * len(hosts):  # admission bounds the total
            chosen = choose(hosts, cap)
            chosen.jobs[(-1, job)] = None  # type: ignore[assignment]
            job += 1
        elif event < 0.8 and total:
            busy = rng.choice([h for h in hosts if h.jobs])
            del busy.jobs[rng.choice(list(busy.jobs))]
        else:
            flipped = rng.choice(hosts)
            flipped.poll = object() if flipped.poll is None else None
        assert all(len(h.jobs) <= cap for h in hosts), [len(h.jobs) for h in hosts]
    assert job > 1000
