"""The run machinery behind the core's face: the loop, the model call, the tool batch.

Private to ``mibyan_jupyter.core``: the public entries are ``run_agent_loop`` /
``run_agent_loop_continue`` (in :mod:`.loop`, re-exported by the core), the event-stream
form in ``core/event_stream.py`` and the :class:`~mibyan_jupyter.core.Agent`. Other packages
import none of this (docs/architecture.md, "Layers"); tests of loop internals may.

One job per module: :mod:`.loop` (the entries and the sequence of a run), :mod:`.turns`
(the state and turns of one run), :mod:`.scope` (what a run's parts share),
:mod:`.request` (what a model call sends), :mod:`.model_call` (streaming one reply),
:mod:`.prepare` / :mod:`.execute` / :mod:`.batch` (one tool call's preparation and
execution, and a message's batch of calls), :mod:`.grammar` (closing what a cut-short run
left open), :mod:`.partial_json` and :mod:`.waiting` (small helpers).

This file imports nothing on purpose: ``core/approval.py`` uses :mod:`.waiting`, and the
loop's modules import the approval gate's configuration, so a package ``__init__`` that
loaded the loop would make the two wait on each other at import time.
"""
