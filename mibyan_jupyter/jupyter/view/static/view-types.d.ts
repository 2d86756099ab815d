// Types view.js uses besides the protocol (which is ops.d.ts): the part of anywidget's model
// it calls, and the page elements it keeps. Checked with view.js by labextension/build.sh.

import type { DeltaKind, FrontEndMessage } from "./ops";

/** The part of anywidget's model the view uses. */
export interface Model {
  send(content: FrontEndMessage): void;
  on(name: "msg:custom", callback: (msg: unknown) => void): void;
  off(name: "msg:custom", callback: (msg: unknown) => void): void;
}

/** The next seq expected, and the element the deltas' bare strings append to. */
export interface Cursor {
  next: number;
  target: [DeltaKind, string] | null;
}

export interface MessageParts {
  node: HTMLElement;
  thinking: HTMLDetailsElement;
  thought: HTMLElement;
  text: HTMLElement;
}

export interface ToolParts {
  node: HTMLElement;
  label: HTMLElement;
  status: HTMLElement;
  args: HTMLElement;
  /** the arguments' (or the code's) section, and its label */
  argsBox: HTMLDetailsElement;
  argsLabel: HTMLElement;
  /** the sections under the head (folded away with the card) */
  body: HTMLElement;
  /** started HH:MM:SS, then HH:MM:SS → duration */
  timing: HTMLElement;
}

export interface BarParts {
  node: HTMLElement;
  progress: HTMLProgressElement;
  label: HTMLElement;
}

/** The view's elements, and the elements of its messages, cards and bars by id. */
export interface Parts {
  root: HTMLElement;
  header: HTMLElement;
  title: HTMLElement;
  modelName: HTMLElement;
  body: HTMLElement;
  budget: HTMLElement;
  stop: HTMLButtonElement;
  /** assistant message id -> its elements */
  messages: Map<string, MessageParts>;
  /** tool call id -> its card's elements */
  tools: Map<string, ToolParts>;
  /** budget name -> its bar's elements */
  bars: Map<string, BarParts>;
  /** ask id -> its card */
  asks: Map<string, HTMLElement>;
}
