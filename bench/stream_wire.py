"""Messages and bytes the kernel sends to the front end for a streamed 20,000-token reply:
the ``%%agent`` view against a naive widget that re-sends the whole text per token.

Ours: the reply goes through ``AgentView`` as agent events (text deltas of ~4.5 characters,
one per token), with the widget's comm replaced by a recording comm. Time is simulated: a
fake clock and timer stand in for the asyncio loop's, and tokens arrive at a fixed rate
(30 tokens/s is a slow model, 100 tokens/s a typical hosted one, 1,000 tokens/s a fast
one), so the throttle acts exactly as it would live but the 200 s reply takes about a
second. One more run uses a real asyncio loop and clock, tokens as fast as the loop goes
(the timer path as in a kernel). The headline figure is the 100 tokens/s one.
The naive peer: an ipywidgets ``HTML`` widget whose ``value`` is set to the accumulated
text at every token, through the same recording comm.

Bytes are the comm messages' ``data`` as JSON (what the kernel's session serializes as the
message content). Each Jupyter message also carries a header, parent header and metadata
(its envelope, estimated below with jupyter_client's Session), not counted in the ratios.
"Streaming" bytes are all messages sent while the reply streams, up to and including the
flush at the message end, except the message's sanitized HTML op, sent once when it ends,
which is shown apart. "time s" is the wall time of feeding the events (or of setting the
naive widget's value). How the stream feels: "upd/s" is the mean number of messages a
second while the text flows, "gap s" the longest time between two of them, "lag ms" the
mean time a token waits in the kernel before it is sent.

``--sweep`` measures the throttle's knobs (characters a timed flush waits for, the mean
wait it aims at, its longest delay) on the Markdown reply at several rates, to choose them.
The last line of output is one JSON object with the figures.

What bounds the ratio at slow rates is arithmetic, not the throttle or the Markdown: each
comm message carries ~43 bytes of widget protocol JSON around its text (``{"method":
"custom", "content": [seq, "…"]}``), the text itself costs 1.027 x its characters as JSON
(escaped newlines and quotes, UTF-8) and the rendered blocks ~0.24 x. Messages sent every
P seconds give a mean token lag of about P / 2 (plus the held-back word), so a mean lag
<= 250 ms needs P <= ~0.5 s. At 30 tokens/s (~138 characters a second on the corpus) that
is >= 43 / (138 x 0.5) = 0.62 of overhead: the ratio is >= 1.027 + 0.24 + 0.62 = 1.89
(1.65 with no Markdown at all), and 1.5 would need P >= 1.34 s, a mean lag near 0.7 s. At
100 tokens/s (~459 characters a second) the floor is 1.027 + 0.24 + 43 / (459 x 0.5) =
1.45, so 1.5 needs P >= 0.42 s: a lag of ~235-250 ms, right at the limit. Measured (this
throttle, 384 characters, mean wait 0.22 s, 0.4 s at most): 2.246 / 1.535 / 1.371 at 30 /
100 / 1,000 tokens/s, mean lag 242 / 218 / 45 ms; the fixed 128-character / 0.25 s
throttle before it: 2.456 / 1.655 / 1.454 at 215 / 156 / 29 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import time
from typing import Any

from _markdown_corpus import features
from _markdown_corpus import tokens as markdown_tokens
from _wire_recording import FakeTime, Recording

from mibyan_jupyter.core.events import MessageEnd, MessageStart, MessageUpdate
from mibyan_jupyter.core.messages import AssistantMessage
from mibyan_jupyter.core.stream import TextDelta, TextEnd, TextStart
from mibyan_jupyter.export.markdown_stream import MarkdownStream
from mibyan_jupyter.jupyter.view import AgentView, ViewHeader

HEADER = ViewHeader(
    title="bench", session_id="bench", model="bench", demo=False, context_window=None
)
WORDS = ("the", "data", "frame", "has", "rows", "and", "each", "value", "is", "a", "mean", "of")


def tokens(n: int) -> list[str]:
    """``n`` tokens of about 4.5 characters: words with spaces, a paragraph break now and then."""
    return [("\n\n" if i % 17 == 0 else " ") * (i > 0) + WORDS[i % len(WORDS)] for i in range(n)]


def events(pieces: list[str]) -> list[Any]:
    partial = AssistantMessage(content="(partial)")  # the view reads deltas only
    out: list[Any] = [
        MessageStart(message=partial),
        MessageUpdate(message=partial, event=TextStart()),
    ]
    out += [MessageUpdate(message=partial, event=TextDelta(delta=p)) for p in pieces]
    out.append(MessageUpdate(message=partial, event=TextEnd()))
    out.append(MessageEnd(message=AssistantMessage(content="".join(pieces))))
    return out


def max_per_second(times: list[float]) -> int:
    """Most messages in any half-open 1 s window (exact: no slack for float sums, the
    throttle leaves none either)."""
    times = sorted(times)
    best = start = 0
    for end, t in enumerate(times):
        while t - times[start] >= 1:
            start += 1
        best = max(best, end - start + 1)
    return best


def summarize(
    label: str,
    rec: Recording,
    text: str,
    seconds: float,
    arrivals: list[float] | None = None,
    pieces: list[str] | None = None,
) -> dict[str, Any]:
    """Streaming figures: the message that carries a final HTML op counts as a flush at the
    message's end, and only its other bytes count as streaming bytes. ``arrivals``: when
    each token arrived (simulated runs), for the lag."""
    streaming = [t for t, _, final, _ in rec.sizes if not final]
    every = [t for t, _, _, _ in rec.sizes]
    streaming_bytes = sum(size for _, size, _, _ in rec.sizes)
    final_bytes = sum(final for _, _, final, _ in rec.sizes)
    flowing = [t for t, _, _, chars in rec.sizes if chars]
    span = flowing[-1] - flowing[0] if len(flowing) > 1 else 0.0
    return {
        "label": label,
        "messages": len(rec.sizes),
        "bytes": streaming_bytes,
        "ratio": streaming_bytes / len(text),
        "final_html_ratio": final_bytes / len(text),
        "flushes_per_s": max_per_second(streaming),
        "flushes_per_s_all": max_per_second(every),
        "updates_per_s": (len(flowing) - 1) / span if span else 0.0,
        "max_gap_s": max((b - a for a, b in itertools.pairwise(flowing)), default=0),
        "lag_ms": 1000 * mean_lag(rec, text, arrivals, pieces) if arrivals else None,
        "seconds": seconds,
        "blocks_ratio": rec.block_bytes / len(text),
    }


def mean_lag(
    rec: Recording, text: str, arrivals: list[float], pieces: list[str] | None = None
) -> float:
    """Mean time from a token's arrival to the message that carries its last character."""
    pieces = tokens(len(arrivals)) if pieces is None else pieces
    sent = [(t, chars) for t, _, _, chars in rec.sizes if chars]
    total = lag = 0.0
    done = m = 0
    cumulative = 0
    for arrival, piece in zip(arrivals, pieces, strict=True):
        cumulative += len(piece)
        while done < cumulative:
            done += sent[m][1]
            m += 1
        lag += sent[m - 1][0] - arrival
        total += 1
    return lag / total


def ours_simulated(
    n: int,
    rate: float,
    *,
    min_chars: int | None = None,
    max_delay: float | None = None,
    lag: float | None = None,
    markdown: bool = False,
) -> dict[str, Any]:
    """``markdown``: the reply is real Markdown (:mod:`_markdown_corpus`), else words."""
    fake = FakeTime()
    rec = Recording(lambda: fake.now)
    try:
        view = AgentView(HEADER)
        outbox = view._outbox
        outbox.clock = lambda: fake.now
        outbox.schedule = fake.schedule
        outbox.min_chars = outbox.min_chars if min_chars is None else min_chars
        outbox.max_delay = outbox.max_delay if max_delay is None else max_delay
        outbox.lag = outbox.lag if lag is None else lag
        view.display()  # no IPython shell: only flushes the header
        rec.sizes.clear()
        pieces = markdown_tokens(n) if markdown else tokens(n)
        stream = events(pieces)
        started = time.perf_counter()
        for i, event in enumerate(stream):
            fake.advance(i / rate)
            view(event)
        elapsed = time.perf_counter() - started
        arrivals = [(i + 2) / rate for i in range(n)]  # after MessageStart and TextStart
        kind = "Markdown" if markdown else "words"
        label = f"this view, {kind}, {rate:,.0f} tokens/s (simulated clock)"
        return summarize(label, rec, "".join(pieces), elapsed, arrivals, pieces)
    finally:
        rec.close()


def ours_real_loop(n: int) -> dict[str, Any]:
    rec = Recording(time.monotonic)

    async def run() -> float:
        view = AgentView(HEADER)
        view.display()
        rec.sizes.clear()
        stream = events(pieces)
        started = time.perf_counter()
        for event in stream:
            view(event)
            await asyncio.sleep(0)  # the loop runs its timers between tokens
        return time.perf_counter() - started

    try:
        pieces = tokens(n)
        elapsed = asyncio.run(run())
        return summarize(
            "this view, real asyncio loop, as fast as it goes", rec, "".join(pieces), elapsed
        )
    finally:
        rec.close()


def naive(n: int) -> dict[str, Any]:
    import ipywidgets

    rec = Recording(time.monotonic)
    try:
        widget = ipywidgets.HTML()
        rec.sizes.clear()
        pieces = tokens(n)
        text = ""
        started = time.perf_counter()
        for piece in pieces:
            text += piece
            widget.value = text
        elapsed = time.perf_counter() - started
        return summarize("naive: HTML widget value set per token", rec, text, elapsed)
    finally:
        rec.close()


def render_us_per_token(n: int, repeat: int = 3) -> float:
    """Kernel time of the Markdown render alone (export/markdown_stream.py), fed one token
    at a time (the outbox feeds it once per flush, so this is its worst case): best of
    ``repeat``, in microseconds per token."""
    pieces = markdown_tokens(n)
    best = float("inf")
    for _ in range(repeat):
        stream = MarkdownStream()
        started = time.perf_counter()
        for piece in pieces:
            stream.feed(piece)
        stream.finish()
        best = min(best, time.perf_counter() - started)
    return 1e6 * best / n


def envelope_bytes() -> int:
    """JSON bytes of a comm_msg's header, parent header and metadata, as a kernel sends them."""
    from jupyter_client.session import Session, json_packer

    session = Session(username="user")
    parent = session.msg("execute_request", content={})
    msg = session.msg("comm_msg", content={"comm_id": "0" * 32, "data": {}}, parent=parent)
    parts = (
        msg["header"],
        msg["parent_header"],
        msg["metadata"],
        {"comm_id": "0" * 32, "data": {}},
    )
    return sum(len(json_packer(p)) for p in parts)


def sweep(n: int) -> None:
    """Bytes/text, updates a second and mean lag on the Markdown reply for each
    (min_chars, lag, max_delay) and rate."""
    rates = (30, 100, 300, 1_000)
    print(f"{n:,} tokens of Markdown; per rate: bytes/text, updates/s, mean lag ms\n")
    head = "  ".join(f"{r:>5,} tok/s {'':>10}" for r in rates)
    print(f"{'chars':>5} {'lag':>5} {'delay':>5}  {head}")
    for min_chars in (128, 256, 384, 512):
        for lag in (0.15, 0.2, 0.22, 0.25):
            for max_delay in (0.25, 0.4):
                cells = []
                for rate in rates:
                    r = ours_simulated(
                        n, rate, min_chars=min_chars, lag=lag, max_delay=max_delay, markdown=True
                    )
                    cells.append(f"{r['ratio']:5.2f} {r['updates_per_s']:5.1f} {r['lag_ms']:5.0f}")
                print(f"{min_chars:>5} {lag:>5} {max_delay:>5}  " + "    ".join(cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=20_000)
    parser.add_argument("--sweep", action="store_true", help="measure the throttle's knobs")
    args = parser.parse_args()
    n = args.tokens
    if args.sweep:
        sweep(n)
        return
    text_chars = len("".join(tokens(n)))
    md_chars = len("".join(markdown_tokens(n)))
    envelope = envelope_bytes()
    runs = [
        ours_simulated(n, 100),
        ours_simulated(2 * n, 100),
        ours_simulated(n, 30),
        ours_simulated(n, 1_000),
        ours_real_loop(n),
        naive(n),
    ]
    md_runs = [ours_simulated(n, rate, markdown=True) for rate in (30, 100, 1_000)]
    md_double = ours_simulated(2 * n, 100, markdown=True)
    runs[1]["label"] += f" [{2 * n:,} tokens]"
    md_double["label"] += f" [{2 * n:,} tokens]"
    peer = runs[-1]
    print(
        f"{n:,} tokens: words {text_chars:,} characters, Markdown {md_chars:,} characters "
        f"({features(''.join(markdown_tokens(n)))}); Jupyter envelope ~{envelope} bytes/message\n"
    )
    print(
        f"{'run':<66} {'messages':>9} {'bytes':>13} {'/text':>9} {'wire/text':>10} {'max/s':>6}"
        f" {'upd/s':>6} {'gap s':>6} {'lag ms':>6} {'time s':>7}"
    )
    for r in [*runs, *md_runs, md_double]:
        chars = md_chars if "Markdown" in r["label"] else text_chars
        chars *= 2 if "[" in r["label"] else 1
        wire = (r["bytes"] + envelope * r["messages"]) / chars
        lag = "-" if r["lag_ms"] is None else f"{r['lag_ms']:.0f}"
        feel = f"{r['updates_per_s']:>6.1f} {r['max_gap_s']:>6.3f}" if r is not peer else " " * 13
        print(
            f"{r['label']:<66} {r['messages']:>9,} {r['bytes']:>13,} {r['ratio']:>9.3f} "
            f"{wire:>10.3f} {r['flushes_per_s']:>6} {feel} {lag:>6} {r['seconds']:>7.2f}"
        )
    slow, double, slowest, fast, loop, _ = runs
    md30, md100, md1000 = md_runs
    print(
        "\n/text: streaming bytes (comm data) per character of the reply, rendered Markdown "
        "included;\nwire/text adds the envelope; max/s: most streaming messages in any 1 s "
        f"(the flush at a message's end comes on top: {md100['flushes_per_s_all']} at 100 "
        f"tokens/s);\nof the Markdown bytes at 100 tokens/s, the rendered blocks are "
        f"{md100['blocks_ratio']:.3f} x the text; the final op's HTML "
        f"{md100['final_html_ratio']:.3f} x.\n"
        f"Doubling the reply at 100 tokens/s: bytes x{md_double['bytes'] / md100['bytes']:.3f}"
        f" (Markdown), x{double['bytes'] / slow['bytes']:.3f} (words); naive vs ours at 100 "
        f"tokens/s: {peer['bytes'] / slow['bytes']:,.0f} x the bytes.\n"
        f"Kernel time per token (view, outbox and Markdown render; simulated clock): "
        f"{1e6 * md100['seconds'] / n:.1f} us (Markdown), {1e6 * slow['seconds'] / n:.1f} us (words)."
    )
    figures = {
        # The goals, on real Markdown (_markdown_corpus.py), rendered live.
        "bytes_ratio_to_text": round(md100["ratio"], 3),
        "bytes_ratio_to_text_30_tok_s": round(md30["ratio"], 3),
        "bytes_ratio_to_text_100_tok_s": round(md100["ratio"], 3),
        "bytes_ratio_to_text_1000_tok_s": round(md1000["ratio"], 3),
        "max_flushes_per_s": md100["flushes_per_s"],
        "max_flushes_per_s_30_tok_s": md30["flushes_per_s"],
        "mean_token_lag_ms": round(md100["lag_ms"], 1),
        "max_mean_token_lag_ms_any_rate": round(max(r["lag_ms"] for r in md_runs), 1),
        "blocks_ratio_to_text": round(md100["blocks_ratio"], 3),
        "kernel_us_per_token_markdown": round(1e6 * md100["seconds"] / n, 1),
        "markdown_render_us_per_token": round(render_us_per_token(n), 1),
        "kernel_us_per_token_words": round(1e6 * slow["seconds"] / n, 1),
        "bytes_growth_doubled_markdown_reply": round(md_double["bytes"] / md100["bytes"], 3),
        "markdown_chars": md_chars,
        "naive_bytes_ratio_to_text": round(peer["ratio"], 1),
        "tokens": n,
        "text_chars": text_chars,
        "token_rate_per_s": 100,
        "messages": md100["messages"],
        "naive_messages": peer["messages"],
        "updates_per_s_while_streaming": round(md100["updates_per_s"], 2),
        "max_gap_between_updates_s": round(md100["max_gap_s"], 3),
        "updates_per_s_30_tok_s": round(md30["updates_per_s"], 2),
        "max_flushes_per_s_1000_tok_s": md1000["flushes_per_s"],
        # The same on plain words (the figures this benchmark gave before Markdown).
        "words_bytes_ratio_to_text": round(slow["ratio"], 3),
        "words_bytes_ratio_to_text_30_tok_s": round(slowest["ratio"], 3),
        "words_bytes_ratio_to_text_1000_tok_s": round(fast["ratio"], 3),
        "words_mean_token_lag_ms": round(slow["lag_ms"], 1),
        "bytes_ratio_to_text_real_loop": round(loop["ratio"], 3),
        "bytes_growth_doubled_reply": round(double["bytes"] / slow["bytes"], 3),
        "final_html_ratio_to_text": round(md100["final_html_ratio"], 3),
        "max_flushes_per_s_incl_message_end": md100["flushes_per_s_all"],
        "envelope_bytes_per_message": envelope,
        "naive_seconds": round(peer["seconds"], 2),
    }
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
