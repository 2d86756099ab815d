"""The view's throttle at every rate (issue 11, "Benchmarks"): never 21 timed flushes in
any second, counted exactly (the outbox compares its own clock, with no slack for float
sums; it used to allow flushes a microsecond early, and 21 fit in a second at 700 and
1,000 tokens/s), and a mean token lag <= 250 ms whatever the rate, because a timed flush
goes once the text waiting has waited ``LAG`` on average. On the outbox alone, fake clock.
"""

from __future__ import annotations

import itertools

import pytest
from view_support import FakeTime

from mibyan_jupyter.jupyter.view.outbox import INTERVAL, LAG, Batch, Outbox

WORDS = ("the", "data", "frame", "has", "rows", "and", "each", "value", "is", "a", "mean")


def exact_max_per_second(times: list[float]) -> int:
    """Most times in any half-open window of exactly one second."""
    best = start = 0
    for end, t in enumerate(times):
        while t - times[start] >= 1:
            start += 1
        best = max(best, end - start + 1)
    return best


def stream(rate: float, n: int = 6_000) -> tuple[list[float], float]:
    """``n`` tokens at ``rate`` a second; the send times and the mean token lag (from a
    token's arrival to the message that carries its last character)."""
    fake = FakeTime()
    sent: list[tuple[float, Batch]] = []
    box = Outbox(lambda b: sent.append((fake.now, b)), clock=fake.clock, schedule=fake.schedule)
    pieces = [("\n\n" if i % 17 == 0 else " ") * (i > 0) + WORDS[i % 11] for i in range(n)]
    arrivals = []
    for i, piece in enumerate(pieces):
        fake.advance(i / rate)
        arrivals.append(fake.now)
        box.delta("thinking", "a1", piece)  # thinking: no Markdown blocks in the batches
    box.end_stream("thinking", "a1")
    box.flush()
    done: list[tuple[float, int]] = []  # (time, characters sent so far)
    total = 0
    for at, batch in sent:
        total += sum(len(op if isinstance(op, str) else op[2]) for op in batch[1:])
        done.append((at, total))
    lag, m, chars = 0.0, 0, 0
    for arrival, piece in zip(arrivals, pieces, strict=True):
        chars += len(piece)
        while done[m][1] < chars:
            m += 1
        lag += done[m][0] - arrival
    return [at for at, _ in sent[:-1]], lag / n  # the last: the stream's end, at once


@pytest.mark.parametrize("rate", [30, 100, 300, 700, 1_000, 2_000, 5_000])
def test_never_21_flushes_in_a_second_and_the_lag_stays_under_250_ms(rate: int) -> None:
    times, lag = stream(rate)
    assert exact_max_per_second(times) <= 20
    assert min(b - a for a, b in itertools.pairwise(times)) >= INTERVAL
    assert lag <= 0.25


def test_a_slow_stream_waits_for_the_lag_not_a_fixed_delay() -> None:
    """At 30 tokens/s a message goes about every 2 x LAG (fewer, fuller messages than a
    fixed 0.25 s timer would send), and the mean lag is near LAG."""
    times, lag = stream(30, n=900)  # 30 s
    period = (times[-1] - times[1]) / (len(times) - 2)
    assert 1.6 * LAG <= period <= 2.4 * LAG
    assert 0.8 * LAG <= lag <= LAG + 0.04
