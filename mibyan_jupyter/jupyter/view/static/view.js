// @ts-check
// The live view of a %%agent cell (anywidget front end; the wire is described in
// mibyan_jupyter/jupyter/view/outbox.py, the ops are typed in ops.py and mirrored in
// ops.d.ts, which `tsc` checks this file against in labextension/build.sh).
//
// The kernel sends batches [seq, op, ...]. They are applied strictly in order: a batch that
// is not the next one is dropped, and render() tells the kernel which seq it expects, so the
// kernel replays what was sent before this module was loaded. An op is a structural object
// {op, ...}; or a delta [kind, id, text], which appends text to an element and makes it the
// target; or a bare string, which appends to that target (kept from batch to batch: every
// batch is applied, in order, from seq 0); or [chars, blocks], rendered blocks of the
// target's text (a "blocks" op, see markdown.js).
//
// Model and tool output is untrusted. It reaches the page only as text (text nodes,
// textContent), with two exceptions: a reply that arrived whole, whose HTML the kernel sanitized
// with nh3 (a streamed one is built from whitelisted elements, markdown.js), and image sources,
// which must be PNG data: URLs (validated in the kernel too).

// The ops of `batch` as objects ({op: kind, id, text} for a delta), or null when it is not
// the batch `cursor` ({next, target}) expects. Pure, so it can be tested without a page.
// The batch is JSON from the kernel: its items are taken to be what ops.d.ts says.
/**
 * @param {unknown} batch
 * @param {Cursor} cursor
 * @returns {ViewOp[] | null}
 */
export function unpack(batch, cursor) {
  if (!Array.isArray(batch) || batch[0] !== cursor.next) return null;
  cursor.next += 1;
  /** @type {ViewOp[]} */
  const ops = [];
  for (const item of batch.slice(1)) {
    if (typeof item === "string") {
      if (cursor.target) ops.push({ op: cursor.target[0], id: cursor.target[1], text: item });
    } else if (Array.isArray(item) && typeof item[0] === "number") {
      // [chars, blocks]: blocks of the target's text (outbox.py; markdown.js builds them)
      if (cursor.target && cursor.target[0] === "text") {
        ops.push({ op: "blocks", id: cursor.target[1], chars: item[0], blocks: String(item[1]) });
      }
    } else if (Array.isArray(item)) {
      cursor.target = [item[0], item[1]];
      ops.push({ op: item[0], id: item[1], text: item[2] });
    } else if (item && typeof item === "object") {
      ops.push(item);
    }
  }
  return ops;
}

/**
 * The ops about the run as a whole: its header, status, prompts, notices and budget bars.
 * @param {Parts} parts
 * @returns {Pick<Handlers, "header" | "run" | "user" | "notice" | "queued" | "bar">}
 */
function runHandlers(parts) {
  return {
    header(op) {
      parts.title.textContent = op.title || `Session ${op.session}`;
      parts.modelName.textContent = op.model;
      parts.header.querySelector(".mibyan-session-id")?.remove(); // a fork renames it
      if (op.session) {
        const id = make("span", "mibyan-session-id", String(op.session).slice(0, 8));
        id.title = `session ${op.session} (%agent resume ${op.session})`;
        parts.header.append(id);
      }
      parts.header.querySelector(".mibyan-answered")?.remove(); // the last reply's model
      if (op.answered) {
        parts.header.append(make("span", "mibyan-answered", `answered by ${op.answered}`));
      }
      if (op.demo && !parts.header.querySelector(".mibyan-demo-badge")) {
        parts.header.append(make("span", "mibyan-demo-badge", "demo model"));
      }
      parts.header.querySelector(".mibyan-reviewable")?.remove(); // the admin policy's line
      if (op.reviewable) {
        parts.header.append(make("span", "mibyan-reviewable", op.reviewable));
      }
      footerHeader(parts, op); // cards.js: the footer's model and session parts
    },
    run(op) {
      parts.root.dataset.status = op.status;
      if (op.status === "done") parts.stop.hidden = true;
      footerStatus(parts, op.status);
    },
    user(op) {
      childBody(parts, op.child).append(make("div", "mibyan-user", op.text)); // children.js
    },
    notice(op) {
      const node = make("div", `mibyan-notice mibyan-${op.level}`, op.text);
      node.dataset.kind = op.kind;
      if (op.detail) {
        const more = make("details", "mibyan-notice-detail");
        more.append(make("summary", "", op.kind === "compaction" ? "Summary" : "Details"), make("pre", "", op.detail));
        node.append(more);
      }
      childBody(parts, op.child).append(node);
    },
    queued(op) {
      const how = op.mode === "follow_up" ? "follow-up" : "steering";
      parts.body.append(make("div", "mibyan-notice mibyan-queued", `Queued (${how}): ${op.text}`));
    },
    bar(op) {
      let b = parts.bars.get(op.name);
      if (!b) {
        const node = make("div", "mibyan-bar");
        node.dataset.name = op.name;
        const progress = make("progress");
        progress.max = 1;
        const label = make("span", "mibyan-bar-label");
        node.append(make("span", "mibyan-bar-name", op.title), progress, label);
        parts.budget.append(node);
        b = { node, progress, label };
        parts.bars.set(op.name, b);
      }
      b.label.textContent = op.label;
      b.progress.hidden = op.fraction === null;
      if (op.fraction !== null) b.progress.value = op.fraction;
      const fraction = op.fraction ?? 0;
      b.node.dataset.level = fraction >= 1 ? "full" : fraction >= 0.8 ? "high" : "ok";
    },
  };
}

/**
 * The ops of an assistant message: its start, streamed text and thinking, end, restart.
 * @param {Parts} parts
 * @returns {Pick<Handlers, "assistant" | "text" | "blocks" | "thinking" | "final" | "clear">}
 */
function messageHandlers(parts) {
  return {
    assistant(op) {
      placeInChild(parts, message(parts, op.id).node, op.child); // a child's: in its card
    },
    text(op) {
      streamText(message(parts, op.id).text, op.text); // markdown.js: the open block
    },
    blocks(op) {
      applyBlocks(message(parts, op.id).text, op); // completed blocks, rendered
    },
    thinking(op) {
      const m = message(parts, op.id);
      m.thinking.hidden = false;
      m.thought.append(op.text);
    },
    final(op) {
      const m = message(parts, op.id);
      // A streamed reply is already rendered (blocks); one sent whole comes as HTML the
      // kernel sanitized (nh3), with its code blocks given their actions here.
      if (op.html) {
        m.text.innerHTML = op.html;
        for (const pre of m.text.querySelectorAll("pre.mibyan-code")) {
          const code = pre.querySelector("code")?.textContent || "";
          codeActions(/** @type {HTMLElement} */ (pre), code);
        }
      }
      m.text.classList.add("mibyan-rendered");
      if (op.thinking) {
        m.thought.textContent = op.thinking;
        m.thinking.hidden = false;
      }
    },
    clear(op) {
      const m = message(parts, op.id);
      resetText(m.text);
      m.thought.replaceChildren();
      m.thinking.hidden = true;
      for (const id of op.calls) {
        parts.tools.get(id)?.node.remove();
        parts.tools.delete(id);
      }
    },
  };
}

/**
 * The ops of a tool card: the call, its streamed arguments, status, result and approval.
 * @param {Parts} parts
 * @param {Model} model
 * @returns {Pick<Handlers, "tool" | "args" | "status" | "tool_output" | "result" | "page" | "approval" | "decided">}
 */
function toolHandlers(parts, model) {
  // The cards themselves are cards.js's (toolCard, approvalCard, decideCard...).
  return {
    tool(op) {
      const t = tool(parts, op.id, op.name);
      placeInChild(parts, t.node, op.child); // a child's call: in its card (children.js)
      toolArgs(t, op);
    },
    args(op) {
      tool(parts, op.id).args.append(op.text);
    },
    status(op) {
      toolStatus(tool(parts, op.id), op);
    },
    tool_output(op) {
      toolOutput(tool(parts, op.id).node, op);
    },
    result(op) {
      toolResult(parts, model, tool(parts, op.id), op);
    },
    page(op) {
      applyPage(tool(parts, op.id).node, op);
    },
    approval(op) {
      const t = tool(parts, op.id, op.name);
      t.node.querySelector(".mibyan-approval")?.remove();
      t.argsBox.after(approvalCard(parts, model, op));
      refreshBatch(parts, model);
    },
    decided(op) {
      decideCard(tool(parts, op.id), op);
      refreshBatch(parts, model);
    },
  };
}

/** After a Stop click, how long before the view says that Stop waits for running code. */
const STOP_HINT_MS = 2000;
const STOP_HINT = "Stopping when the running code returns: use Kernel > Interrupt to stop it now";

/**
 * @param {{ model: Model, el: HTMLElement }} props
 * @returns {() => void}
 */
function render({ model, el }) {
  const parts = layout(el);
  const { stop } = parts;
  stop.addEventListener("click", () => {
    stop.disabled = true;
    stop.textContent = "Stopping…";
    model.send({ type: "stop" });
    // Stop reaches blocking code only over a kernel subshell (jupyter/view/subshells.py);
    // still running after STOP_HINT_MS: it waits for the code, so say how to stop it now.
    setTimeout(() => {
      if (!stop.hidden) stop.textContent = STOP_HINT;
    }, STOP_HINT_MS);
  });
  /** @type {Handlers} */
  const apply = {
    ...runHandlers(parts),
    ...messageHandlers(parts),
    ...toolHandlers(parts, model),
    ...askHandlers(parts, model),
    ...statsHandlers(parts),
    ...childHandlers(parts),
  };
  /** @type {Cursor} */
  const cursor = { next: 0, target: null };

  /** @param {unknown} msg */
  function onMessage(msg) {
    const ops = unpack(msg, cursor);
    for (const op of ops || []) {
      if (!Object.hasOwn(apply, op.op)) continue;
      try {
        // The handler of op.op takes that op (Handlers pairs them; TS cannot see it here).
        /** @type {(op: ViewOp) => void} */ (apply[op.op])(op);
      } catch (error) {
        console.error("mibyan view: could not apply", op.op, error);
      }
    }
  }

  model.on("msg:custom", onMessage);
  model.send({ type: "rendered", next: cursor.next });
  return () => model.off("msg:custom", onMessage);
}

export default { render };
