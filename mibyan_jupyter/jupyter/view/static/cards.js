// @ts-check
// The approval and ask-the-user cards of the live view (a plain script joined before view.js
// by widget.py; the types are the globals of dom.js and ops.d.ts).

/**
 * An approval card whose buttons send the decision (once: they are disabled on a click).
 * @param {Model} model
 * @param {import("./ops").ApprovalOp} op
 */
function approvalCard(model, op) {
  const card = make("div", "mibyan-approval");
  card.dataset.callId = op.id;
  const ask = make("div", "mibyan-approval-title", "Approve this call to ");
  ask.append(make("code", "", op.name), "?");
  card.append(ask);
  if (op.reason) card.append(make("div", "mibyan-approval-reason", op.reason));
  if (op.risk) card.append(make("div", "mibyan-risk", op.risk));
  card.append(make("pre", "mibyan-approval-args", op.args));
  const actions = make("div", "mibyan-approval-actions");
  const approve = button("mibyan-approve", "Approve", "jp-mod-accept");
  const deny = button("mibyan-deny", "Deny", "jp-mod-reject");
  const reason = make("input", "mibyan-deny-reason jp-mod-styled");
  reason.type = "text";
  reason.placeholder = "Reason (optional)";
  const always = button("mibyan-always", "Always for this tool", "jp-mod-reject");
  const session = button("mibyan-session", "For this session", "jp-mod-reject");
  actions.append(approve, deny, reason, session, always);
  const outcome = make("div", "mibyan-approval-outcome");
  card.append(actions, outcome);
  /**
   * @param {"approve" | "deny"} action
   * @param {Scope} scope
   */
  const send = (action, scope) => {
    for (const control of controls(card)) control.disabled = true;
    outcome.textContent = "Sending…";
    model.send({ type: "decision", call_id: op.id, action, scope, reason: reason.value });
  };
  approve.addEventListener("click", () => send("approve", "once"));
  deny.addEventListener("click", () => send("deny", "once"));
  reason.addEventListener("keydown", (event) => {
    if (event.key === "Enter") send("deny", "once");
  });
  always.addEventListener("click", () => send("approve", "always"));
  session.addEventListener("click", () => send("approve", "session"));
  return card;
}

/**
 * An ask card: the question, one button per choice (the default marked), a line that
 * says what happens when no one can click. A click sends the answer once (every button
 * is then disabled); the kernel's "answered" op shows the outcome.
 * @param {Model} model
 * @param {import("./ops").AskOp} op
 */
function askCard(model, op) {
  const card = make("div", "mibyan-ask");
  card.dataset.askId = op.id;
  card.append(make("div", "mibyan-ask-question", op.question));
  const actions = make("div", "mibyan-ask-actions");
  for (const choice of op.choices) {
    const look = choice.value === op.default ? "jp-mod-accept" : "jp-mod-reject";
    const node = button("mibyan-ask-choice", choice.label, look);
    node.dataset.value = choice.value;
    if (choice.detail) node.title = choice.detail;
    node.addEventListener("click", () => {
      for (const control of controls(card)) control.disabled = true;
      outcome.textContent = "Sending…";
      model.send({ type: "answer", ask_id: op.id, choice: choice.value });
    });
    actions.append(node);
  }
  const fallback = op.choices.find((choice) => choice.value === op.default);
  const outcome = make("div", "mibyan-ask-outcome");
  const note = `Without a front end to click: ${fallback ? fallback.label : op.default}.`;
  card.append(actions, make("div", "mibyan-ask-default", note), outcome);
  return card;
}

/**
 * A spilled result's "load" button (its card shows the preview): each click asks the
 * kernel for the next chunk of the full text from the offset kept on the button.
 * @param {Model} model
 * @param {import("./ops").ResultOp} op
 */
function spillButton(model, op) {
  const node = button("mibyan-expand", `Load the full result (${op.spilled} characters)`, "");
  node.dataset.next = "0";
  node.addEventListener("click", () => {
    node.disabled = true;
    node.textContent = "Loading…";
    model.send({ type: "expand", call_id: op.id, offset: Number(node.dataset.next) });
  });
  return node;
}

/**
 * A chunk of a spilled result: the first replaces the preview, the next ones append.
 * Tool output is untrusted: text nodes only.
 * @param {HTMLElement} card
 * @param {import("./ops").PageOp} op
 */
function applyPage(card, op) {
  /** @type {HTMLButtonElement | null} */
  const more = card.querySelector(".mibyan-expand");
  /** @type {HTMLElement | null} */
  const pre = card.querySelector(".mibyan-tool-result pre");
  if (!more || !pre || String(op.offset) !== more.dataset.next) return; // stale or replayed
  if (op.error) {
    more.replaceWith(make("div", "mibyan-more mibyan-error", op.error));
    return;
  }
  if (op.offset === 0) {
    pre.textContent = op.text;
    card.querySelector(".mibyan-tool-result .mibyan-more")?.remove();
  } else {
    pre.append(op.text);
  }
  more.dataset.next = String(op.offset + op.text.length);
  if (op.done) {
    more.remove();
    return;
  }
  more.disabled = false;
  more.textContent = `Load more (${more.dataset.next} characters shown)`;
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
        const how = op.by === "default" ? "no front end answered, so" : "chosen:";
        outcome.textContent = `${how} ${op.label}`;
      }
    },
  };
}

/**
 * Append what a running tool printed to its card's live output (text only: untrusted).
 * @param {HTMLElement} card the tool card
 * @param {import("./ops").ToolOutputOp} op
 * @returns {void}
 */
function toolOutput(card, op) {
  let out = /** @type {HTMLElement | null} */ (card.querySelector(".mibyan-tool-output"));
  if (!out) {
    out = make("pre", "mibyan-tool-output");
    card.append(out);
  }
  const part = make("span", `mibyan-${op.stream}`, op.text);
  out.append(part);
}
