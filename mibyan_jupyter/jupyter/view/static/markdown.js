// @ts-check
// The answer's Markdown, rendered as it streams, and the actions on its code blocks.
// Joined after dom.js and before cards.js (widget.py); type-checked against ops.d.ts.
//
// The kernel renders (mibyan_jupyter/export/markdown_blocks.py, docs/architecture.md,
// "Streaming"): a reply's text streams in as text, and when blocks of it complete a "blocks"
// op gives a program that shows its next `chars` characters as elements: `<x` opens the
// element of tag code x (an optional "(attribute)" follows), `>` closes it, a number N shows
// the next N characters as text, `~N` skips N, 'text' (\ escapes) is literal text. Nothing
// here parses Markdown or writes HTML: elements come from TAG_CODES only, text goes in as
// text nodes, links must be http(s)/mailto, and code colours are class names from HIGHLIGHT.

const TAG_CODES = new Map(
  Object.entries({
    p: "p", P: "pre", 1: "h1", 2: "h2", 3: "h3", 4: "h4", 5: "h5", 6: "h6", u: "ul",
    o: "ol", l: "li", q: "blockquote", c: "code", e: "em", s: "strong", d: "del", a: "a",
    b: "br", r: "hr", t: "table", h: "thead", y: "tbody", w: "tr", H: "th", D: "td",
  }),
);
const VOID_TAGS = new Set(["br", "hr"]);
const HIGHLIGHT = new Set(["k", "o", "m", "s", "c", "nb", "nf", "nd", "nv", "nt"]);
const ALIGNS = new Map([["l", "left"], ["c", "center"], ["r", "right"]]);
const LINK_SCHEMES = new Set(["http:", "https:", "mailto:"]);
const INSERT_EVENT = "mibyan-insert-cell";

/**
 * @typedef {{ source: string, upto: number, blocks: HTMLElement, open: HTMLElement }} Streamed
 */

/** @type {WeakMap<HTMLElement, Streamed>} the streamed text of each message's element */
const STREAMED = new WeakMap();

/**
 * @param {HTMLElement} el a message's text element
 * @returns {Streamed}
 */
function streamed(el) {
  let s = STREAMED.get(el);
  if (!s) {
    s = { source: "", upto: 0, blocks: make("div", "mibyan-blocks"), open: make("div", "mibyan-open") };
    el.replaceChildren(s.blocks, s.open);
    STREAMED.set(el, s);
  }
  return s;
}

/**
 * Streamed text: kept (the blocks' ranges index it) and shown as the open block.
 * @param {HTMLElement} el
 * @param {string} text
 */
function streamText(el, text) {
  const s = streamed(el);
  s.source += text;
  s.open.append(text);
}

/**
 * Show the next op.chars characters of the text as the op's blocks; the rest stays open.
 * @param {HTMLElement} el
 * @param {import("./ops").BlocksOp} op
 */
function applyBlocks(el, op) {
  const s = streamed(el);
  const text = s.source.slice(s.upto, s.upto + Math.max(op.chars, 0));
  try {
    s.blocks.append(runProgram(op.blocks, text));
  } catch (error) {
    console.error("mibyan view: could not render blocks", error);
    s.blocks.append(make("div", "mibyan-open", text)); // shown as text, never lost
  }
  s.upto += text.length;
  s.open.textContent = s.source.slice(s.upto);
}

/**
 * Forget the streamed text (a reply that starts over).
 * @param {HTMLElement} el
 */
function resetText(el) {
  STREAMED.delete(el);
  el.replaceChildren();
}

/**
 * Run a blocks program (see the top of this file) over `text`.
 * @param {string} program
 * @param {string} text
 * @returns {DocumentFragment}
 */
function runProgram(program, text) {
  const root = document.createDocumentFragment();
  /** @type {(HTMLElement | DocumentFragment)[]} */
  const stack = [root];
  const top = () => stack[stack.length - 1];
  let cursor = 0;
  let i = 0;
  /** @returns {number} */
  const number = () => {
    const start = i;
    while (i < program.length && program[i] >= "0" && program[i] <= "9") i += 1;
    return Number(program.slice(start, i));
  };
  /** @returns {string} */
  const quoted = () => {
    let out = "";
    i += 1; // the opening quote
    while (i < program.length && program[i] !== "'") {
      if (program[i] === "\\") i += 1;
      out += program[i] ?? "";
      i += 1;
    }
    i += 1; // the closing quote
    return out;
  };
  while (i < program.length) {
    const c = program[i];
    if (c >= "0" && c <= "9") {
      const n = number();
      top().append(text.slice(cursor, cursor + n));
      cursor += n;
    } else if (c === "~") {
      i += 1;
      cursor += number();
    } else if (c === "'") {
      top().append(quoted());
    } else if (c === "<") {
      const tag = TAG_CODES.get(program[i + 1]);
      i += 2;
      let attr = "";
      if (program[i] === "(") {
        const close = program[i + 1] === "'" ? attrEnd(program, i + 1) : program.indexOf(")", i);
        attr = program.slice(i + 1, close < 0 ? program.length : close);
        i = close < 0 ? program.length : close + 1;
      }
      if (!tag) continue;
      const node = element(tag, attr, text);
      top().append(node);
      if (!VOID_TAGS.has(tag)) stack.push(node);
    } else if (c === ">") {
      const done = stack.length > 1 ? stack.pop() : null;
      if (done instanceof HTMLPreElement) finishCode(done);
      i += 1;
    } else {
      i += 1; // a space between numbers, or anything unknown
    }
  }
  return root;
}

/**
 * Where the attribute that starts with a quote at `at` ends (its ")").
 * @param {string} program
 * @param {number} at
 * @returns {number}
 */
function attrEnd(program, at) {
  let i = at + 1;
  while (i < program.length && program[i] !== "'") i += program[i] === "\\" ? 2 : 1;
  return program.indexOf(")", i);
}

/**
 * An element of the whitelist with its one attribute.
 * @param {string} tag
 * @param {string} attr
 * @param {string} text the blocks' text (a link's URL may be a place in it)
 * @returns {HTMLElement}
 */
function element(tag, attr, text) {
  const el = document.createElement(tag);
  if (el instanceof HTMLAnchorElement) {
    const place = /^(\d+),(\d+)$/.exec(attr);
    let url = attr;
    if (place) url = text.slice(Number(place[1]), Number(place[1]) + Number(place[2]));
    else if (attr.startsWith("'")) url = attr.slice(1, -1).replace(/\\(.)/g, "$1");
    el.href = safeHref(url);
    el.target = "_blank";
    el.rel = "noopener noreferrer";
  } else if (el instanceof HTMLOListElement && /^\d+$/.test(attr)) {
    el.start = Number(attr);
  } else if (el instanceof HTMLTableCellElement && ALIGNS.has(attr)) {
    el.style.textAlign = ALIGNS.get(attr) || "";
  } else if (el instanceof HTMLPreElement) {
    const [lang, hl] = attr.split("|");
    el.className = "mibyan-code";
    if (lang) el.dataset.lang = lang;
    el.dataset.hl = hl || "";
  }
  return el;
}

/**
 * A code block whose text is in: colour it by its runs ("3k 1 4nf": length, then class) and
 * give it its actions.
 * @param {HTMLPreElement} pre
 */
function finishCode(pre) {
  const code = pre.textContent || "";
  const box = make("code");
  let at = 0;
  for (const run of (pre.dataset.hl || "").split(" ")) {
    const match = /^(\d+)([a-z]*)$/.exec(run);
    if (!match || at >= code.length) continue;
    const piece = code.slice(at, at + Number(match[1]));
    at += piece.length;
    if (match[2] && HIGHLIGHT.has(match[2])) box.append(make("span", match[2], piece));
    else box.append(piece);
  }
  if (at < code.length) box.append(code.slice(at));
  delete pre.dataset.hl;
  pre.replaceChildren(box);
  codeActions(pre, code);
}

/**
 * @param {unknown} href
 * @returns {string}
 */
function safeHref(href) {
  if (typeof href !== "string") return "#";
  try {
    return LINK_SCHEMES.has(new URL(href, "https://relative.invalid/").protocol) ? href : "#";
  } catch {
    return "#";
  }
}

/**
 * Give a code block its actions: copy, and "Insert as cell below" where the front-end
 * extension is present (it marks document.body, which CSS reads to show the button, and
 * listens for the bubbling "mibyan-insert-cell" event; labextension/src/insert.ts).
 * Called for the answer's code blocks and for code the agent ran.
 * @param {HTMLElement} pre the block's element
 * @param {string} source the code, verbatim
 * @returns {void}
 */
function codeActions(pre, source) {
  pre.classList.add("mibyan-has-actions");
  pre.querySelector(":scope > .mibyan-code-actions")?.remove();
  const bar = make("div", "mibyan-code-actions");
  const copy = button("mibyan-copy", "Copy", "jp-mod-reject");
  copy.title = "Copy the code";
  copy.addEventListener("click", () => {
    copyCode(source).then((done) => {
      copy.textContent = done ? "Copied" : "Copy failed";
      setTimeout(() => (copy.textContent = "Copy"), 1500);
    });
  });
  const insert = button("mibyan-insert", "Insert as cell below", "jp-mod-reject");
  insert.title = "Insert this code as a new cell below this one";
  insert.addEventListener("click", () => {
    insert.dispatchEvent(
      new CustomEvent(INSERT_EVENT, { bubbles: true, composed: true, detail: { source } }),
    );
  });
  bar.append(copy, insert);
  pre.prepend(bar);
}

/**
 * The clipboard API where the page may use it, else a hidden textarea and execCommand.
 * @param {string} text
 * @returns {Promise<boolean>}
 */
async function copyCode(text) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    const area = make("textarea", "mibyan-copy-area");
    area.value = text;
    area.setAttribute("readonly", "");
    area.style.position = "fixed";
    area.style.opacity = "0";
    document.body.append(area);
    area.select();
    let done = false;
    try {
      done = document.execCommand("copy");
    } catch {
      done = false;
    }
    area.remove();
    return done;
  }
}
