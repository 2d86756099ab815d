"""The fake provider as a command: ``python -m mibyan_jupyter.testing`` serves it on
localhost, echoing (demo mode) or playing a JSON script, until Ctrl-C.

Why a module apart from the server: the command is what a user points a notebook at to try
the agent with no key; the server class is what tests import, and needs no ``argparse``.
"""

from __future__ import annotations

import argparse
import contextlib
import threading
from collections.abc import Sequence

from mibyan_jupyter.testing.fake_server import FakeProviderServer
from mibyan_jupyter.testing.scripts import echo_reply, load_script


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m mibyan_jupyter.testing [--port N] [--script FILE.json]
    [--context-window TOKENS]``."""
    parser = argparse.ArgumentParser(
        prog="python -m mibyan_jupyter.testing",
        description="A fake LLM provider on localhost speaking the OpenAI Chat Completions, "
        "OpenAI Responses and Anthropic Messages APIs. Without --script it echoes the last "
        "user message; with one it plays the script's replies and faults in order.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765, help="0 picks a free port")
    parser.add_argument("--script", help="JSON list of replies and faults")
    parser.add_argument("--quiet", action="store_true", help="do not log requests")
    parser.add_argument(
        "--context-window",
        type=int,
        default=None,
        metavar="TOKENS",
        help="refuse prompts over TOKENS (counted at 3 UTF-8 bytes a token) with HTTP 400",
    )
    args = parser.parse_args(argv)
    items = load_script(args.script) if args.script else []
    fallback = None if args.script else echo_reply
    with FakeProviderServer(
        *items,
        host=args.host,
        port=args.port,
        fallback=fallback,
        verbose=not args.quiet,
        context_window=args.context_window,
    ) as server:
        print(f"Fake provider listening on {server.base_url}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()
    return 0
