// @ts-check
// The approval and ask-the-user cards of the live view, and "Approve all" (a plain script
// joined before view.js by widget.py; the types are the globals of dom.js and ops.d.ts).

/**
 * An approval card: Approve, Deny (with an optional reason), for this session, always.
 * Keyboard: with the card focused, Enter approves and Esc goes to the reason (Enter there
 * denies). A click sends the decision once; the card then waits for the kernel's "decided".
 * @param {Parts} parts
 * @param {Model} model
 * @param {import("./ops").ApprovalOp} op
 */
function approvalCard(parts, model, op) {
  const card = make("div", "mibyan-approval");
  card.dataset.callId = op.id;
  card.dataset.pending = "true";
  card.tabIndex = 0;
  const ask = make("div", "mibyan-approval-title", "Approve this call to ");
  ask.append(make("code", "", op.name));
  if (op.server) ask.append(" ", make("span", "mibyan-approval-server", `(${op.server})`));
  ask.append("?");
  card.append(ask);
  if (op.reason) card.append(make("div", "mibyan-approval-reason", op.reason));
  if (op.risk) card.append(make("div", "mibyan-risk", op.risk));
  if (op.powers) card.append(make("div", "mibyan-powers", op.powers));
  card.append(make("pre", "mibyan-approval-args", op.args));
  const actions = make("div", "mibyan-approval-actions");
  const approve = button("mibyan-approve", "Approve", "jp-mod-accept");
  const deny = button("mibyan-deny", "Deny", "jp-mod-reject");
  const reason = make("input", "mibyan-deny-reason jp-mod-styled");
  reason.type = "text";
  reason.placeholder = "Reason for a denial (optional)";
  reason.setAttribute("aria-label", "Reason for a denial");
  const session = button("mibyan-session", "For this session", "jp-mod-reject");
  const always = button("mibyan-always", "Always for this tool", "jp-mod-reject");
  actions.append(approve, deny, session, always, reason);
  const outcome = make("div", "mibyan-approval-outcome");
  const keys = make("div", "mibyan-approval-keys", "Enter approves · Esc: reason, then Enter denies");
  card.append(actions, keys, outcome);
  /**
   * @param {"approve" | "deny"} action
   * @param {Scope} scope
   */
  const send = (action, scope) => {
    if (card.dataset.pending !== "true") return;
    sending(card);
    model.send({ type: "decision", call_id: op.id, action, scope, reason: reason.value });
    refreshBatch(parts, model);
  };
  approve.addEventListener("click", () => send("approve", "once"));
  deny.addEventListener("click", () => send("deny", "once"));
  session.addEventListener("click", () => send("approve", "session"));
  always.addEventListener("click", () => send("approve", "always"));
  reason.addEventListener("keydown", (event) => {
    if (event.key === "Enter") send("deny", "once");
    else if (event.key === "Escape") card.focus();
    event.stopPropagation();
  });
  card.addEventListener("keydown", (event) => {
    if (event.target !== card) return; // a focused button handles its own Enter
    if (event.key === "Enter") {
      event.preventDefault();
      send("approve", "once");
    } else if (event.key === "Escape") {
      event.preventDefault();
      reason.focus();
    }
  });
  return card;
}

/**
 * A decision was sent from this card (or from "Approve all"): it waits for the kernel.
 * @param {HTMLElement} card
 */
function sending(card) {
  card.dataset.pending = "false";
  for (const control of controls(card)) control.disabled = true;
  const outcome = card.querySelector(".mibyan-approval-outcome");
  if (outcome) outcome.textContent = "Sending…";
}

/**
 * The approval cards still waiting for a click, in the order they are shown.
 * @param {Parts} parts
 * @returns {HTMLElement[]}
 */
function waitingCards(parts) {
  return Array.from(parts.body.querySelectorAll(".mibyan-approval[data-pending='true']"));
}

/**
 * "Approve all (N)" and "Deny all", above the first waiting card, while two or more wait.
 * @param {Parts} parts
 * @param {Model} model
 */
function refreshBatch(parts, model) {
  let bar = /** @type {HTMLElement | null} */ (parts.body.querySelector(".mibyan-batch"));
  const waiting = waitingCards(parts);
  if (waiting.length < 2) {
    bar?.remove();
    return;
  }
  if (!bar) {
    bar = make("div", "mibyan-batch");
    const all = button("mibyan-approve-all", "", "jp-mod-accept");
    const none = button("mibyan-deny-all", "Deny all", "jp-mod-reject");
    const node = bar;
    /** @param {"approve" | "deny"} action */
    const decideAll = (action) => {
      const cards = waitingCards(parts);
      const ids = cards.map((card) => card.dataset.callId || "");
      for (const card of cards) sending(card);
      node.remove();
      model.send({ type: "decide_all", action, call_ids: ids, reason: "" });
    };
    all.addEventListener("click", () => decideAll("approve"));
    none.addEventListener("click", () => decideAll("deny"));
    bar.append(make("span", "mibyan-batch-label", "Calls waiting for you:"), all, none);
  }
  const all = bar.querySelector(".mibyan-approve-all");
  if (all) all.textContent = `Approve all (${waiting.length})`;
  const first = waiting[0].closest(".mibyan-tool") || waiting[0];
  if (bar.nextElementSibling !== first) first.before(bar);
}

/**
 * The kernel's decision: the card collapses to one line (who decided, the scope, the
 * reason) and the call stays one click away in the tool card's arguments.
 * @param {ToolParts} t
 * @param {import("./ops").DecidedOp} op
 */
function decideCard(t, op) {
  /** @type {HTMLElement | null} */
  let card = t.node.querySelector(".mibyan-approval");
  if (!card) {
    card = make("div", "mibyan-approval mibyan-approval-auto");
    card.dataset.callId = op.id;
    t.body.prepend(card);
  }
  const outcome = make("div", "mibyan-approval-outcome", op.outcome);
  outcome.dataset.approved = String(op.approved);
  card.replaceChildren(outcome);
  card.dataset.pending = "false";
  card.removeAttribute("tabindex");
  card.classList.add("mibyan-decided");
  t.body.prepend(card); // the one line first, the call folded under it
  t.argsBox.open = false;
}

/**
 * An ask card: the question, one button per choice (the default marked), a text box when
 * the op has one, a line that says what happens when no one can click. A click or a typed
 * answer (Enter or Send) is sent once (every control is then disabled); the kernel's
 * "answered" op shows the outcome. Question and answers are shown as text only.
 * @param {Model} model
 * @param {import("./ops").AskOp} op
 */
function askCard(model, op) {
  const card = make("div", "mibyan-ask");
  card.dataset.askId = op.id;
  card.append(make("div", "mibyan-ask-question", op.question));
  const actions = make("div", "mibyan-ask-actions");
  const outcome = make("div", "mibyan-ask-outcome");
  /** @param {import("./ops").AnswerMessage} message */
  const send = (message) => {
    if (card.dataset.sent === "true") return;
    card.dataset.sent = "true";
    for (const control of controls(card)) control.disabled = true;
    outcome.textContent = "Sending…";
    model.send(message);
  };
  for (const choice of op.choices) {
    const look = choice.value === op.default ? "jp-mod-accept" : "jp-mod-reject";
    const node = button("mibyan-ask-choice", choice.label, look);
    node.dataset.value = choice.value;
    if (choice.detail) node.title = choice.detail;
    node.addEventListener("click", () => send({ type: "answer", ask_id: op.id, choice: choice.value }));
    actions.append(node);
  }
  card.append(actions);
  if (op.text) card.append(askTextBox(op.id, op.text, send));
  const fallback = op.choices.find((choice) => choice.value === op.default);
  const note = `Without a front end to click: ${fallback ? fallback.label : op.default}.`;
  card.append(make("div", "mibyan-ask-default", note), outcome);
  return card;
}

/**
 * The ask card's text box and its Send button: Enter or Send sends the typed text (not
 * when it is blank); keys typed there never reach JupyterLab's shortcuts.
 * @param {string} askId
 * @param {import("./ops").AskText} box
 * @param {(message: import("./ops").AnswerMessage) => void} send
 */
function askTextBox(askId, box, send) {
  const row = make("div", "mibyan-ask-typed");
  const input = make("input", "mibyan-ask-text jp-mod-styled");
  input.type = "text";
  input.maxLength = box.limit;
  input.placeholder = box.placeholder;
  input.setAttribute("aria-label", box.placeholder);
  const go = button("mibyan-ask-send", "Send", "jp-mod-accept");
  const typed = () => {
    if (input.value.trim()) send({ type: "answer", ask_id: askId, choice: "", text: input.value });
  };
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter") {
      event.preventDefault();
      typed();
    }
    event.stopPropagation();
  });
  go.addEventListener("click", typed);
  row.append(input, go);
  return row;
}

/**
 * The ops of ask cards: a question, and its answer.
 * @param {Parts} parts
 * @param {Model} model
 * @returns {Pick<Handlers, "ask" | "answered">}
 */
function askHandlers(parts, model) {
  return {
    ask(op) {
      parts.asks.get(op.id)?.remove();
      const card = askCard(model, op);
      parts.asks.set(op.id, card);
      parts.body.append(card);
    },
    answered(op) {
      const card = parts.asks.get(op.id);
      if (!card) return;
      for (const control of controls(card)) control.disabled = true;
      card.classList.add("mibyan-decided");
      card.dataset.answer = op.choice;
      /** @type {HTMLElement | null} */
      const outcome = card.querySelector(".mibyan-ask-outcome");
      if (outcome) {
        const how = { default: "no front end answered, so", stopped: "stopped before an answer" };
        const said = op.by === "user" ? (op.choice === "" ? "answered:" : "chosen:") : how[op.by];
        outcome.textContent = op.by === "stopped" ? said : `${said} ${op.label}`;
      }
    },
  };
}
