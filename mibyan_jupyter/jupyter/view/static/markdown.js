// @ts-check
// The answer's Markdown, rendered as it streams, and the actions on its code blocks.
// Joined after dom.js and before cards.js (widget.py); type-checked against ops.d.ts.

/**
 * Give a code block its actions: copy, and "Insert as cell below" where the front-end
 * extension is present. Called for the answer's code blocks and for code the agent ran.
 * @param {HTMLElement} pre the block's element
 * @param {string} source the code, verbatim
 * @returns {void}
 */
// eslint-disable-next-line no-unused-vars
function codeActions(pre, source) {
  void pre;
  void source;
}
