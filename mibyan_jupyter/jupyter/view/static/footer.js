// @ts-check
// The live view's footer as labelled parts (model, budgets, status, session with Copy) and
// each message's time, tokens and cost on hover (a plain script joined before view.js).

/**
 * A labelled part of the footer (model, status, session), made when first needed; the
 * budget bars are its other parts (view.js "bar"), ordered by CSS on data-name.
 * @param {Parts} parts
 * @param {string} name
 * @param {string} label
 * @returns {HTMLElement} the part's value element
 */
function footerPart(parts, name, label) {
  const selector = `.mibyan-part[data-name="${name}"]`;
  let part = /** @type {HTMLElement | null} */ (parts.budget.querySelector(selector));
  if (!part) {
    part = make("span", "mibyan-part");
    part.dataset.name = name;
    part.append(make("span", "mibyan-bar-name", label), make("span", "mibyan-part-value"));
    parts.budget.append(part);
  }
  return /** @type {HTMLElement} */ (part.querySelector(".mibyan-part-value"));
}

/**
 * The footer's model and session id (with a copy action), from the header op.
 * @param {Parts} parts
 * @param {import("./ops").HeaderOp} op
 */
function footerHeader(parts, op) {
  const model = op.answered ? `${op.model} (answered by ${op.answered})` : op.model;
  footerPart(parts, "model", "model").textContent = model;
  if (!op.session) return;
  const value = footerPart(parts, "session", "session");
  const id = make("code", "mibyan-footer-session", op.session.slice(0, 8));
  id.title = `session ${op.session} (%agent resume ${op.session})`;
  const copy = button("mibyan-copy-session", "Copy", "");
  copy.title = "Copy the session id";
  copy.addEventListener("click", () => {
    copyCode(op.session).then((done) => {
      copy.textContent = done ? "Copied" : "Copy failed"; // markdown.js's clipboard helper
      setTimeout(() => (copy.textContent = "Copy"), 1500);
    });
  });
  value.replaceChildren(id, copy);
}

/**
 * @param {Parts} parts
 * @param {import("./ops").RunStatus} status
 */
function footerStatus(parts, status) {
  const words = { running: "running", awaiting_approval: "waiting for you", done: "done" };
  footerPart(parts, "status", "status").textContent = words[status] || status;
}

/**
 * A message's time, tokens and cost, shown when the pointer is on it (or it has focus).
 * @param {Parts} parts
 * @returns {Pick<Handlers, "stats">}
 */
function statsHandlers(parts) {
  return {
    stats(op) {
      const m = message(parts, op.id);
      const cost = op.cost === null ? "cost unknown" : `$${op.cost.toFixed(4)}`;
      const tokens = `${op.input.toLocaleString()} tokens in, ${op.output.toLocaleString()} out`;
      const line = `${duration(op.seconds)} · ${tokens} · ${cost}`;
      m.node.querySelector(".mibyan-msg-stats")?.remove();
      m.node.append(make("div", "mibyan-msg-stats", line));
      m.node.title = line;
    },
  };
}
