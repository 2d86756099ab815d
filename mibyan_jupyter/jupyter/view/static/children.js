// @ts-check
// Delegated child agents' nested cards (a plain script joined before view.js by widget.py;
// the kernel side is mibyan_jupyter/jupyter/view/children.py). A child's card sits in the
// card of the parent's delegate_task call and folds like any <details>; the child's own
// messages, tool cards and approval cards are made inside it: their ops carry `child`, and
// their ids are scoped "<child>/<id>", so they never meet the parent's.

/**
 * @typedef {{ node: HTMLDetailsElement, body: HTMLElement, status: HTMLElement,
 *   spend: HTMLElement, maxTurns: number }} ChildParts
 */

/** @type {WeakMap<Parts, Map<string, ChildParts>>} */
const CHILDREN = new WeakMap();

/**
 * The child cards of one view, by child id.
 * @param {Parts} parts
 * @returns {Map<string, ChildParts>}
 */
function childCards(parts) {
  let cards = CHILDREN.get(parts);
  if (!cards) {
    cards = new Map();
    CHILDREN.set(parts, cards);
  }
  return cards;
}

/**
 * Where an element of `child` goes: inside that child's card, else the view's body.
 * @param {Parts} parts
 * @param {string | undefined} child
 * @returns {HTMLElement}
 */
function childBody(parts, child) {
  return (child && childCards(parts).get(child)?.body) || parts.body;
}

/**
 * An element just made in the view's body (dom.js makes them there) moves into the card
 * of `child` when it is a child's; one made before stays where it is.
 * @param {Parts} parts
 * @param {HTMLElement} node
 * @param {string | undefined} child
 */
function placeInChild(parts, node, child) {
  const body = childBody(parts, child);
  if (body !== parts.body && node.parentElement === parts.body) body.append(node);
}

/**
 * The card of a child agent: its goal, status and spend in the summary line, the tools it
 * was given, then what it does.
 * @param {import("./ops").ChildStartOp} op
 * @returns {ChildParts}
 */
function childCard(op) {
  const node = make("details", "mibyan-child");
  node.open = true;
  node.dataset.child = op.id;
  node.dataset.status = "running";
  const head = make("summary", "mibyan-child-head");
  const status = make("span", "mibyan-child-status", "running");
  const spend = make("span", "mibyan-child-spend", "");
  head.append(make("span", "mibyan-child-label", "Child agent"), make("span", "mibyan-child-goal", op.goal), status, spend);
  const tools = make("div", "mibyan-child-tools", `Tools: ${op.tools.length ? op.tools.join(", ") : "none"}`);
  const body = make("div", "mibyan-child-body");
  node.append(head, tools, body);
  return { node, body, status, spend, maxTurns: op.max_turns };
}

/**
 * @param {number} turns
 * @param {number} maxTurns
 * @param {number} tokens
 * @param {number | null} cost
 */
function childSpend(turns, maxTurns, tokens, cost) {
  const money = cost === null ? "cost unknown" : `$${cost.toFixed(4)}`;
  return `${turns}/${maxTurns} turns · ${tokens.toLocaleString()} tokens · ${money}`;
}

/**
 * The ops of child cards: a child starts, its state and spend change.
 * @param {Parts} parts
 * @returns {Pick<Handlers, "child_start" | "child_status">}
 */
function childHandlers(parts) {
  return {
    child_start(op) {
      const cards = childCards(parts);
      cards.get(op.id)?.node.remove();
      const card = childCard(op);
      cards.set(op.id, card);
      const holder = parts.tools.get(op.parent);
      (holder ? holder.body : parts.body).append(card.node);
      card.spend.textContent = childSpend(0, op.max_turns, 0, 0);
    },
    child_status(op) {
      const card = childCards(parts).get(op.id);
      if (!card) return;
      card.node.dataset.status = op.status;
      card.status.textContent = op.status.replace(/_/g, " ");
      card.spend.textContent = childSpend(op.turns, card.maxTurns, op.tokens, op.cost);
    },
  };
}
