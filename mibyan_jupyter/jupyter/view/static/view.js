// The live view of a %%agent cell (anywidget front end; the wire is described in
// mibyan_jupyter/jupyter/view/outbox.py).
//
// The kernel sends batches [seq, op, ...]. They are applied strictly in order: a batch that
// is not the next one is dropped, and render() tells the kernel which seq it expects, so the
// kernel replays what was sent before this module was loaded. An op is a structural object
// {op, ...}; or a delta [kind, id, text], which appends text to an element and makes it the
// target; or a bare string, which appends to that target (kept from batch to batch: every
// batch is applied, in order, from seq 0).
//
// Model and tool output is untrusted. It reaches the page only as text (text nodes,
// textContent), with two exceptions: a finished message's HTML, which the kernel sanitized
// with nh3, and image sources, which must be PNG data: URLs (validated in the kernel too).

const PNG_URL = /^data:image\/png;base64,[A-Za-z0-9+/]+=*$/;

function make(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = text;
  return node;
}

function button(className, label, look) {
  const node = make("button", `${className} jp-mod-styled ${look}`, label);
  node.type = "button";
  return node;
}

// The ops of `batch` as objects ({op: kind, id, text} for a delta), or null when it is not
// the batch `cursor` ({next, target}) expects. Pure, so it can be tested without a page.
export function unpack(batch, cursor) {
  if (!Array.isArray(batch) || batch[0] !== cursor.next) return null;
  cursor.next += 1;
  const ops = [];
  for (const item of batch.slice(1)) {
    if (typeof item === "string") {
      if (cursor.target) ops.push({ op: cursor.target[0], id: cursor.target[1], text: item });
    } else if (Array.isArray(item)) {
      cursor.target = [item[0], item[1]];
      ops.push({ op: item[0], id: item[1], text: item[2] });
    } else if (item && typeof item === "object") {
      ops.push(item);
    }
  }
  return ops;
}

function render({ model, el }) {
  const root = make("div", "mibyan-view");
  root.dataset.status = "running";
  const header = make("div", "mibyan-header");
  const title = make("span", "mibyan-title");
  const modelName = make("span", "mibyan-model");
  header.append(title, modelName);
  const body = make("div", "mibyan-body");
  const footer = make("div", "mibyan-footer");
  const budget = make("div", "mibyan-budget");
  const stop = button("mibyan-stop", "Stop", "jp-mod-warn");
  footer.append(budget, stop);
  root.append(header, body, footer);
  el.replaceChildren(root);

  const messages = new Map(); // assistant message id -> its elements
  const tools = new Map(); // tool call id -> its card's elements
  const bars = new Map(); // budget name -> its bar's elements
  const cursor = { next: 0, target: null }; // the next seq expected, the deltas' target

  stop.addEventListener("click", () => {
    stop.disabled = true;
    stop.textContent = "Stopping…";
    model.send({ type: "stop" });
  });

  function message(id) {
    let m = messages.get(id);
    if (!m) {
      const node = make("div", "mibyan-assistant");
      const thinking = make("details", "mibyan-thinking");
      thinking.append(make("summary", "", "Thinking"));
      const thought = make("div", "mibyan-thinking-text");
      thinking.append(thought);
      thinking.hidden = true;
      const text = make("div", "mibyan-text");
      node.append(thinking, text);
      body.append(node);
      m = { node, thinking, thought, text };
      messages.set(id, m);
    }
    return m;
  }

  function tool(id, name) {
    let t = tools.get(id);
    if (!t) {
      const node = make("div", "mibyan-tool");
      node.dataset.callId = id;
      const head = make("div", "mibyan-tool-head");
      const label = make("span", "mibyan-tool-name", name || "tool");
      const status = make("span", "mibyan-tool-status", "pending");
      head.append(label, status);
      const args = make("pre", "mibyan-tool-args");
      node.dataset.status = "pending";
      node.append(head, args);
      body.append(node);
      t = { node, label, status, args };
      tools.set(id, t);
    } else if (name) {
      t.label.textContent = name;
    }
    return t;
  }

  function images(urls) {
    const box = make("div", "mibyan-images");
    for (const url of urls || []) {
      if (typeof url !== "string" || !PNG_URL.test(url)) continue;
      const img = make("img");
      img.alt = "tool output image";
      img.src = url;
      box.append(img);
    }
    return box;
  }

  function decide(card, id, action, scope) {
    const reason = card.querySelector(".mibyan-deny-reason").value;
    for (const control of card.querySelectorAll("button, input")) control.disabled = true;
    card.querySelector(".mibyan-approval-outcome").textContent = "Sending…";
    model.send({ type: "decision", call_id: id, action, scope, reason });
  }

  function approvalCard(op) {
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
    card.append(actions, make("div", "mibyan-approval-outcome"));
    approve.addEventListener("click", () => decide(card, op.id, "approve", "once"));
    deny.addEventListener("click", () => decide(card, op.id, "deny", "once"));
    reason.addEventListener("keydown", (event) => {
      if (event.key === "Enter") decide(card, op.id, "deny", "once");
    });
    always.addEventListener("click", () => decide(card, op.id, "approve", "always"));
    session.addEventListener("click", () => decide(card, op.id, "approve", "session"));
    return card;
  }

  const apply = {
    header(op) {
      title.textContent = op.title || `Session ${op.session}`;
      modelName.textContent = op.model;
      if (op.session) {
        const id = make("span", "mibyan-session-id", String(op.session).slice(0, 8));
        id.title = `session ${op.session} (%agent resume ${op.session})`;
        header.append(id);
      }
      if (op.demo) header.append(make("span", "mibyan-demo-badge", "demo model"));
    },
    run(op) {
      root.dataset.status = op.status;
      if (op.status === "done") stop.hidden = true;
    },
    user(op) {
      body.append(make("div", "mibyan-user", op.text));
    },
    assistant(op) {
      message(op.id);
    },
    text(op) {
      message(op.id).text.append(op.text);
    },
    thinking(op) {
      const m = message(op.id);
      m.thinking.hidden = false;
      m.thought.append(op.text);
    },
    final(op) {
      const m = message(op.id);
      m.text.innerHTML = op.html; // sanitized by the kernel (nh3)
      m.text.classList.add("mibyan-rendered");
      if (op.thinking) {
        m.thought.textContent = op.thinking;
        m.thinking.hidden = false;
      }
    },
    clear(op) {
      const m = message(op.id);
      m.text.replaceChildren();
      m.thought.replaceChildren();
      m.thinking.hidden = true;
      for (const id of op.calls) {
        tools.get(id)?.node.remove();
        tools.delete(id);
      }
    },
    tool(op) {
      const t = tool(op.id, op.name);
      if (typeof op.args === "string") t.args.textContent = op.args;
    },
    args(op) {
      tool(op.id).args.append(op.text);
    },
    status(op) {
      const t = tool(op.id);
      t.status.textContent = op.status;
      t.node.dataset.status = op.status;
    },
    result(op) {
      const t = tool(op.id);
      t.node.querySelector(".mibyan-tool-result")?.remove();
      const details = make("details", "mibyan-tool-result");
      const summary = make("summary", "", op.summary);
      if (op.error) summary.classList.add("mibyan-error");
      details.append(summary, make("pre", "", op.text));
      if (op.more) details.append(make("div", "mibyan-more", `… ${op.more} more characters`));
      t.node.append(details, images(op.images));
    },
    approval(op) {
      const t = tool(op.id, op.name);
      t.node.querySelector(".mibyan-approval")?.remove();
      t.node.append(approvalCard(op));
    },
    decided(op) {
      const t = tool(op.id);
      let card = t.node.querySelector(".mibyan-approval");
      if (!card) {
        card = make("div", "mibyan-approval mibyan-approval-auto");
        card.dataset.callId = op.id;
        card.append(make("div", "mibyan-approval-outcome"));
        t.node.append(card);
      }
      for (const control of card.querySelectorAll("button, input")) control.disabled = true;
      card.classList.add("mibyan-decided");
      const outcome = card.querySelector(".mibyan-approval-outcome");
      outcome.textContent = op.outcome;
      outcome.dataset.approved = String(op.approved);
    },
    bar(op) {
      let b = bars.get(op.name);
      if (!b) {
        const node = make("div", "mibyan-bar");
        node.dataset.name = op.name;
        const progress = make("progress");
        progress.max = 1;
        const label = make("span", "mibyan-bar-label");
        node.append(make("span", "mibyan-bar-name", op.title), progress, label);
        budget.append(node);
        b = { node, progress, label };
        bars.set(op.name, b);
      }
      b.label.textContent = op.label;
      b.progress.hidden = op.fraction === null;
      if (op.fraction !== null) b.progress.value = op.fraction;
      b.node.dataset.level = op.fraction >= 1 ? "full" : op.fraction >= 0.8 ? "high" : "ok";
    },
    notice(op) {
      const node = make("div", `mibyan-notice mibyan-${op.level}`, op.text);
      node.dataset.kind = op.kind;
      body.append(node);
    },
    queued(op) {
      const how = op.mode === "follow_up" ? "follow-up" : "steering";
      body.append(make("div", "mibyan-notice mibyan-queued", `Queued (${how}): ${op.text}`));
    },
  };

  function onMessage(msg) {
    const ops = unpack(msg, cursor);
    for (const op of ops || []) {
      if (!Object.hasOwn(apply, op.op)) continue;
      try {
        apply[op.op](op);
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
