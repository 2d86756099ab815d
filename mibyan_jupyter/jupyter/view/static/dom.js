// @ts-check
// The live view's DOM builders (a plain script: widget.py joins static/dom.js, cards.js and
// view.js into the one ES module anywidget loads; tsc checks the three together, see
// labextension/tsconfig.view.json). Everything here builds elements from text only.

/** @typedef {import("./ops").ViewOp} ViewOp */
/** @typedef {import("./ops").Handlers} Handlers */
/** @typedef {import("./ops").Scope} Scope */
/** @typedef {import("./view-types").Model} Model */
/** @typedef {import("./view-types").Cursor} Cursor */
/** @typedef {import("./view-types").Parts} Parts */
/** @typedef {import("./view-types").MessageParts} MessageParts */
/** @typedef {import("./view-types").ToolParts} ToolParts */

const PNG_URL = /^data:image\/png;base64,[A-Za-z0-9+/]+=*$/;

/**
 * @template {keyof HTMLElementTagNameMap} K
 * @param {K} tag
 * @param {string} [className]
 * @param {string | null} [text]
 * @returns {HTMLElementTagNameMap[K]}
 */
function make(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = text;
  return node;
}

/**
 * @param {string} className
 * @param {string} label
 * @param {string} look
 */
function button(className, label, look) {
  const node = make("button", `${className} jp-mod-styled ${look}`, label);
  node.type = "button";
  return node;
}

/**
 * @param {HTMLElement} el
 * @returns {Parts}
 */
function layout(el) {
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
  const [messages, tools, bars, asks] = [new Map(), new Map(), new Map(), new Map()];
  return { root, header, title, modelName, body, budget, stop, messages, tools, bars, asks };
}

/**
 * The elements of assistant message `id`, made when first needed.
 * @param {Parts} parts
 * @param {string} id
 * @returns {MessageParts}
 */
function message(parts, id) {
  let m = parts.messages.get(id);
  if (!m) {
    const node = make("div", "mibyan-assistant");
    const thinking = make("details", "mibyan-thinking");
    thinking.append(make("summary", "", "Thinking"));
    const thought = make("div", "mibyan-thinking-text");
    thinking.append(thought);
    thinking.hidden = true;
    const text = make("div", "mibyan-text");
    node.append(thinking, text);
    parts.body.append(node);
    m = { node, thinking, thought, text };
    parts.messages.set(id, m);
  }
  return m;
}

/**
 * The card of tool call `id`, made when first needed (named `name` when one is given).
 * @param {Parts} parts
 * @param {string} id
 * @param {string} [name]
 * @returns {ToolParts}
 */
function tool(parts, id, name) {
  let t = parts.tools.get(id);
  if (!t) {
    t = toolCard(id, name || "tool"); // cards.js
    parts.body.append(t.node);
    parts.tools.set(id, t);
  } else if (name) {
    t.label.textContent = name;
  }
  return t;
}

/** @param {unknown[]} urls */
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

/** @param {Element} card */
function controls(card) {
  return /** @type {NodeListOf<HTMLButtonElement | HTMLInputElement>} */ (
    card.querySelectorAll("button, input")
  );
}
