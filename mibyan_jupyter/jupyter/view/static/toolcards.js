// @ts-check
// The tool cards of the live view: a head over separated sections (the arguments or the
// code, the approval, the live output, the result), folding, timing (a plain script joined
// before view.js by widget.py; docs/architecture.md, "Streaming").

const OUTPUT_LINES = 2000;

/** A message with more tool cards than this shows its finished ones collapsed. */
const OPEN_CARDS = 3;

/**
 * The card of a tool call: a head (name, status, timing; a click folds the card) over
 * its sections: the arguments or the code, the approval, the live output, the result.
 * @param {string} id
 * @param {string} name
 * @returns {ToolParts}
 */
function toolCard(id, name) {
  const node = make("div", "mibyan-tool");
  node.dataset.callId = id;
  node.dataset.status = "pending";
  const head = make("div", "mibyan-tool-head");
  const toggle = button("mibyan-tool-toggle", "", "");
  toggle.setAttribute("aria-expanded", "true");
  toggle.title = "Fold or unfold this call";
  const label = make("span", "mibyan-tool-name", name);
  const status = make("span", "mibyan-tool-status", "pending");
  const timing = make("span", "mibyan-tool-timing");
  head.append(toggle, label, status, timing);
  const body = make("div", "mibyan-tool-body");
  const argsBox = make("details", "mibyan-tool-section mibyan-tool-args-box");
  argsBox.open = true;
  const argsLabel = make("summary", "mibyan-section-label", "Arguments");
  const args = make("pre", "mibyan-tool-args");
  argsBox.append(argsLabel, args);
  body.append(argsBox);
  node.append(head, body);
  toggle.addEventListener("click", (event) => {
    event.stopPropagation();
    foldTool(node, node.dataset.folded !== "true", true);
  });
  head.addEventListener("click", () => foldTool(node, node.dataset.folded !== "true", true));
  return { node, label, status, args, argsBox, argsLabel, body, timing };
}

/**
 * Fold (only the head shows) or unfold a tool card; a fold the user chose is kept.
 * @param {HTMLElement} node
 * @param {boolean} folded
 * @param {boolean} byUser
 */
function foldTool(node, folded, byUser) {
  if (!byUser && node.dataset.userFolded) return;
  if (byUser) node.dataset.userFolded = "true";
  node.dataset.folded = String(folded);
  node.querySelector(".mibyan-tool-toggle")?.setAttribute("aria-expanded", String(!folded));
}

/**
 * The call's arguments, or its code (run_python, run_shell) with the code actions.
 * @param {ToolParts} t
 * @param {import("./ops").ToolOp} op
 */
function toolArgs(t, op) {
  if (typeof op.args !== "string") return;
  t.args.textContent = op.args;
  if (op.lang) {
    t.argsLabel.textContent = `Code (${op.lang})`;
    t.args.classList.add("mibyan-tool-code");
    t.args.parentElement?.querySelector(".mibyan-code-actions")?.remove();
    codeActions(t.args, op.args);
  }
  if (op.msg) t.node.dataset.msg = op.msg;
}

/**
 * The call's status, and when it began to run.
 * @param {ToolParts} t
 * @param {import("./ops").StatusOp} op
 */
function toolStatus(t, op) {
  t.status.textContent = op.status;
  t.node.dataset.status = op.status;
  if (op.status === "awaiting approval") foldTool(t.node, false, false);
  if (typeof op.started === "number") {
    t.node.dataset.started = String(op.started);
    const what = op.status === "approved" ? "approved" : "started";
    t.timing.textContent = `${what} ${clockTime(op.started)}`;
  }
}

/**
 * The result as its own section (folded to its first line), images inline, the time it
 * took; with more than a few cards in the message, the finished ones fold.
 * @param {Parts} parts
 * @param {Model} model
 * @param {ToolParts} t
 * @param {import("./ops").ResultOp} op
 */
function toolResult(parts, model, t, op) {
  t.node.querySelector(".mibyan-tool-result")?.remove();
  t.node.querySelector(".mibyan-images")?.remove();
  const details = make("details", "mibyan-tool-section mibyan-tool-result");
  const heading = `${op.error ? "Error" : "Result"}: ${op.summary}`;
  const summary = make("summary", "mibyan-section-label", heading);
  if (op.error) summary.classList.add("mibyan-error");
  details.append(summary, make("pre", "", op.text));
  if (op.more) details.append(make("div", "mibyan-more", `… ${op.more} more characters`));
  if (op.spilled) details.append(spillButton(model, op));
  t.body.append(details, images(op.images));
  if (typeof op.seconds === "number") {
    const began = Number(t.node.dataset.started);
    const start = began ? `${clockTime(began)} → ` : "";
    t.timing.textContent = `${start}${duration(op.seconds)}`;
  }
  t.node.dataset.finished = "true";
  const msg = t.node.dataset.msg || "";
  const cards = Array.from(parts.tools.values()).filter((c) => (c.node.dataset.msg || "") === msg);
  if (cards.length > OPEN_CARDS) {
    for (const c of cards) if (c.node.dataset.finished === "true") foldTool(c.node, true, false);
  }
}

/**
 * @param {number} seconds Unix time
 * @returns {string}
 */
function clockTime(seconds) {
  return new Date(seconds * 1000).toLocaleTimeString([], { hour12: false });
}

/**
 * @param {number} seconds
 * @returns {string}
 */
function duration(seconds) {
  if (seconds < 10) return `${seconds.toFixed(2)} s`;
  if (seconds < 60) return `${seconds.toFixed(1)} s`;
  return `${Math.floor(seconds / 60)} min ${Math.round(seconds % 60)} s`;
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
  more.dataset.next = String(op.next);
  if (op.done) {
    more.remove();
    return;
  }
  more.disabled = false;
  more.textContent = `Load more (${more.dataset.next} characters shown)`;
}

/**
 * Append what a running tool printed to its card's live output (text only: untrusted).
 * The card keeps the last OUTPUT_LINES lines and says how many earlier ones it dropped.
 * @param {HTMLElement} card the tool card
 * @param {import("./ops").ToolOutputOp} op
 * @returns {void}
 */
function toolOutput(card, op) {
  let out = /** @type {HTMLElement | null} */ (card.querySelector(".mibyan-tool-output"));
  if (!out) {
    const section = make("div", "mibyan-tool-section mibyan-tool-output-box");
    const label = make("div", "mibyan-section-label", "Output");
    section.append(label, make("div", "mibyan-more mibyan-dropped"));
    out = make("pre", "mibyan-tool-output");
    section.append(out);
    const result = card.querySelector(".mibyan-tool-result");
    const body = card.querySelector(".mibyan-tool-body") || card;
    if (result) result.before(section);
    else body.append(section);
  }
  const following = out.scrollHeight - out.scrollTop - out.clientHeight < 24; // at the end
  out.append(make("span", `mibyan-${op.stream}`, op.text));
  if (card.dataset.status === "approved") {
    card.dataset.status = "running"; // its turn came: it prints
    const status = card.querySelector(".mibyan-tool-status");
    if (status) status.textContent = "running";
  }
  const lines = Number(out.dataset.lines || "0") + (op.text.match(/\n/g) || []).length;
  out.dataset.lines = String(lines);
  if (lines > OUTPUT_LINES + OUTPUT_LINES / 10) trimOutput(out, lines - OUTPUT_LINES);
  if (following) out.scrollTop = out.scrollHeight; // keep showing the newest lines
}

/**
 * Drop the first `excess` lines of a live output (in one go, not per line: cheap).
 * @param {HTMLElement} out
 * @param {number} excess
 */
function trimOutput(out, excess) {
  let left = excess;
  while (left > 0 && out.firstChild) {
    const part = /** @type {HTMLElement} */ (out.firstChild);
    const text = part.textContent || "";
    let cut = 0;
    while (left > 0) {
      const next = text.indexOf("\n", cut);
      if (next < 0) break;
      cut = next + 1;
      left -= 1;
    }
    if (left > 0 || cut >= text.length) {
      part.remove(); // all of it is in the lines dropped
      continue;
    }
    part.textContent = text.slice(cut);
    break;
  }
  const dropped = Number(out.dataset.dropped || "0") + (excess - left);
  out.dataset.dropped = String(dropped);
  out.dataset.lines = String(Number(out.dataset.lines) - (excess - left));
  const note = out.parentElement?.querySelector(".mibyan-dropped");
  if (note) {
    const lines = dropped.toLocaleString();
    note.textContent = `… ${lines} earlier lines not shown (the result has what the model saw)`;
  }
}
