"""``%agent stop | status | policy | config | models``: the running agents, the current
session, the approval rules, the ``%%agent`` defaults and the models one can use."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mibyan_jupyter.jupyter.cell.options import AgentUsageError
from mibyan_jupyter.jupyter.commands.common import cost, parser
from mibyan_jupyter.jupyter.commands.tables import Message, Table
from mibyan_jupyter.jupyter.defaults import setting_rows
from mibyan_jupyter.jupyter.guard import refuse_inside_run
from mibyan_jupyter.jupyter.state import kernel_state, notebook_path
from mibyan_jupyter.secrets import REDACT

if TYPE_CHECKING:
    from mibyan_jupyter.store.sessions import SessionInfo


def stop(words: list[str]) -> Message:
    state = kernel_state()
    runs = state.active_runs()
    for run in runs:
        handle = state.session(run.session_id)
        if handle is not None:
            handle.agent.abort("stopped with %agent stop")
    return Message(f"Stopping {len(runs)} run(s)." if runs else "No agent is running.")


def status(words: list[str]) -> Table:
    """The current session as the next cell will continue it: its model (the one the next
    cell's request names, unless the cell gives --model) and, when a fallback wrote the
    last reply, which model that was."""
    state = kernel_state()
    current = state.current_session(notebook_path())
    rows: list[tuple[str, str]] = [("database", str(state.store().db.path))]
    if current is None:
        rows.append(("session", "none yet (the next %%agent cell starts one)"))
    else:
        from mibyan_jupyter.store.session_queries import last_answer_model

        store = state.store()
        info: SessionInfo = store.get(current)
        rows += [
            ("session", f"{info.id} — {info.title}"),
            ("model", model_label(info.model)),
        ]
        answered = last_answer_model(store.db, info.id)
        if answered and not model_label(info.model).endswith(answered):
            rows.append(("last answer by", REDACT(answered)))  # a fallback answered
        rows += [
            ("messages", str(info.message_count)),
            ("cost", cost(info.cost) or "unknown"),
            ("status", "running" if state.running(current) else info.status),
        ]
    rows.append(("notebook", notebook_path() or "(unknown to the kernel)"))
    return Table(("", ""), rows, caption="Agent status")


def model_label(model: str | None) -> str:
    """A session's model as the view's header names it (the spec's label: no base URL,
    nothing secret); the stored name when it is not a provider spec (the demo models)."""
    from mibyan_jupyter.providers.spec import ModelSpecError, resolve_model

    if not model:
        return ""
    try:
        return REDACT(resolve_model(model).label)
    except ModelSpecError:
        return REDACT(model)


def policy(words: list[str]) -> Any:
    """Show, set or reset the approval rules: "allow"/"deny" are saved as "always" in the
    store and applied to every session this kernel has open. Setting and resetting work
    only from a cell the user runs, never from code inside an agent run (jupyter/guard.py);
    saved rows that were not written that way are listed as ignored."""
    args = parser(
        "policy",
        (("action",), {"nargs": "?", "default": "show", "choices": ("show", "set", "reset")}),
        (("tool",), {"nargs": "?"}),
        (("decision",), {"nargs": "?", "choices": ("allow", "deny", "ask")}),
    ).parse_args(words)
    state = kernel_state()
    if args.action != "show":
        refuse_inside_run(f"%agent policy {args.action}")
    store = state.store()
    handles = state.handles()
    if args.action == "set":
        if not args.tool or not args.decision:
            raise AgentUsageError("%agent policy set TOOL allow|deny|ask")
        if args.decision == "ask":
            store.forget_always_rule(args.tool)
        else:
            store.approval_rules.save(args.tool, args.decision == "allow", origin="cell")
        for handle in handles:
            handle.policy.set_decision(args.tool, args.decision, "always")
    elif args.action == "reset":
        saved = {rule.tool for rule in store.approval_rules.rows()}
        for tool in [args.tool] if args.tool else sorted(saved):
            store.forget_always_rule(tool)
        for handle in handles:
            handle.policy.reset(args.tool)
    rows = [
        (t, "allow" if ok else "deny", "always (saved)") for t, ok in store.always_rules().items()
    ]
    rows += [
        (r.tool, "ignored", "saved, but not by a click or a cell you ran")
        for r in store.approval_rules.untrusted()
    ]
    current = state.session(state.current_session(notebook_path()) or "")
    if current is not None:
        rows += [
            (t, "allow" if ok else "deny", "this session")
            for t, ok in current.policy.remembered("session").items()
        ]
    note = (
        "Tools with side effects ask by default; read-only tools run without asking. Rules"
        " change only from a cell you run or a click on a card, never from code the agent"
        " runs (that code does run with your powers)."
    )
    from mibyan_jupyter.policy.show import with_admin_policy  # the floors in force

    rows, note = with_admin_policy(rows, note, store.db.conn, store.db.user)
    return Table(("tool", "decision", "scope"), rows, caption="Approval policy", note=note)


def config(words: list[str]) -> Table:
    """The settings every ``%%agent`` cell starts from, as the kernel state holds them."""
    rows = [
        (f"c.AgentMagics.{name}", value, meaning)
        for name, value, meaning in setting_rows(kernel_state().defaults)
    ]
    return Table(("setting", "value", "meaning"), rows, caption="%%agent defaults")


def models(words: list[str]) -> Table:
    from mibyan_jupyter.jupyter.cell.models import model_rows

    return Table(("model", "provider", "status"), model_rows(), caption="Models")
