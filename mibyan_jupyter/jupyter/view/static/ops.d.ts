// The live view's protocol for the front end: a hand-written mirror of
// mibyan_jupyter/jupyter/view/ops.py, where the kernel's side is defined (read its docstrings
// there). view.js is type-checked against these types by `tsc` in labextension/build.sh, and
// tests/jupyter/test_view_ops.py checks that the ops a real run sends type-check as ViewOp
// and that both files name the same kinds. Change both files together.

export type DeltaKind = "text" | "thinking" | "args";
export type RunStatus = "running" | "awaiting_approval" | "done";
export type ToolStatus =
  | "running"
  | "awaiting approval"
  | "approved"
  | "done"
  | "error"
  | "denied"
  | "stopped";
export type NoticeLevel = "info" | "warning" | "error";
export type NoticeKind =
  | "note"
  | "error"
  | "stop"
  | "budget"
  | "retry"
  | "fallback"
  | "compaction"
  | "notes";
export type BarName = "turns" | "total_tokens" | "cost" | "context";
export type QueueMode = "steer" | "follow_up";
export type Scope = "once" | "session" | "always";
export type AnsweredBy = "user" | "default" | "stopped";

export interface HeaderOp {
  op: "header";
  title: string;
  session: string;
  model: string;
  demo: boolean;
  answered?: string;
  reviewable?: string;
}

export interface RunOp {
  op: "run";
  status: RunStatus;
}

export interface UserOp {
  op: "user";
  text: string;
  child?: string;
}

export interface AssistantOp {
  op: "assistant";
  id: string;
  child?: string;
}

export interface DeltaOp {
  op: DeltaKind;
  id: string;
  text: string;
}

export interface FinalOp {
  op: "final";
  id: string;
  html: string;
  thinking: string | null;
}

export interface BlocksOp {
  op: "blocks";
  id: string;
  chars: number;
  /** A program over the next `chars` characters of the text (export/markdown_blocks.py). */
  blocks: string;
}

export interface ClearOp {
  op: "clear";
  id: string;
  calls: string[];
}

export interface ToolOp {
  op: "tool";
  id: string;
  name: string;
  msg: string | null;
  args?: string;
  lang?: string;
  child?: string;
}

export interface StatusOp {
  op: "status";
  id: string;
  status: ToolStatus;
  started?: number;
}

export interface ToolOutputOp {
  op: "tool_output";
  id: string;
  stream: "stdout" | "stderr";
  text: string;
}

export interface ResultOp {
  op: "result";
  id: string;
  summary: string;
  text: string;
  more: number;
  error: boolean;
  images: string[];
  seconds?: number;
  spilled?: number;
}

export interface PageOp {
  op: "page";
  id: string;
  offset: number;
  text: string;
  next: number;
  done: boolean;
  error: string;
}

export interface ApprovalOp {
  op: "approval";
  id: string;
  name: string;
  args: string;
  reason: string;
  risk: string | null;
  powers?: string;
  /** Where the tool comes from, e.g. "server NAME" for an MCP server's tool. */
  server?: string;
}

export interface DecidedOp {
  op: "decided";
  id: string;
  approved: boolean;
  outcome: string;
}

export interface AskChoice {
  value: string;
  label: string;
  detail: string;
}

/** A text box on an ask card: a typed answer is sent with choice "" and its text. */
export interface AskText {
  placeholder: string;
  limit: number;
}

export interface AskOp {
  op: "ask";
  id: string;
  question: string;
  choices: AskChoice[];
  default: string;
  text?: AskText;
}

export interface AnsweredOp {
  op: "answered";
  id: string;
  choice: string;
  label: string;
  by: AnsweredBy;
}

export interface StatsOp {
  op: "stats";
  id: string;
  input: number;
  output: number;
  cost: number | null;
  seconds: number;
}

export interface BarOp {
  op: "bar";
  name: BarName;
  title: string;
  label: string;
  fraction: number | null;
}

export interface NoticeOp {
  op: "notice";
  level: NoticeLevel;
  kind: NoticeKind;
  text: string;
  detail?: string;
  child?: string;
}

export interface QueuedOp {
  op: "queued";
  mode: QueueMode;
  text: string;
}

export type ChildStatus =
  | "running"
  | "awaiting_approval"
  | "completed"
  | "stopped"
  | "budget_exhausted"
  | "error";

/** A delegated child starts: its card goes in the card of the parent's call `parent`. */
export interface ChildStartOp {
  op: "child_start";
  id: string;
  parent: string;
  goal: string;
  tools: string[];
  max_turns: number;
}

export interface ChildStatusOp {
  op: "child_status";
  id: string;
  status: ChildStatus;
  turns: number;
  tokens: number;
  cost: number | null;
}

/** The ops sent as objects. */
export type StructuralOp =
  | HeaderOp
  | RunOp
  | UserOp
  | AssistantOp
  | FinalOp
  | BlocksOp
  | ClearOp
  | ToolOp
  | StatusOp
  | ToolOutputOp
  | ResultOp
  | PageOp
  | ApprovalOp
  | DecidedOp
  | AskOp
  | AnsweredOp
  | StatsOp
  | BarOp
  | NoticeOp
  | QueuedOp
  | ChildStartOp
  | ChildStatusOp;

/** Every op the front end applies, after unpacking. */
export type ViewOp = StructuralOp | DeltaOp;
export type OpKind = ViewOp["op"];

/** One item of a batch: an op, a delta that names its element, text for the last one, or
 * [chars, blocks]: blocks of the last one's text (a "blocks" op for that element). */
export type WireItem =
  | StructuralOp
  | [DeltaKind, string, string]
  | string
  | [number, string];
/** What the kernel sends in one custom message: its sequence number, then the items. */
export type Batch = [number, ...WireItem[]];

// -- messages from the front end ------------------------------------------------------------

export interface RenderedMessage {
  type: "rendered";
  next: number;
}

export interface DecisionMessage {
  type: "decision";
  call_id: string;
  action: "approve" | "deny";
  scope: Scope;
  reason: string;
}

export interface DecideAllMessage {
  type: "decide_all";
  action: "approve" | "deny";
  call_ids: string[];
  reason: string;
}

export interface StopMessage {
  type: "stop";
}

export interface AnswerMessage {
  type: "answer";
  ask_id: string;
  choice: string;
  text?: string;
}

export interface ExpandMessage {
  type: "expand";
  call_id: string;
  offset: number;
}

export type FrontEndMessage =
  | RenderedMessage
  | DecisionMessage
  | DecideAllMessage
  | StopMessage
  | AnswerMessage
  | ExpandMessage;

// -- for view.js --------------------------------------------------------------------------

/** The op of kind K (the three delta kinds share one shape). */
export type OpOf<K extends OpKind> = K extends DeltaKind
  ? DeltaOp
  : Extract<StructuralOp, { op: K }>;
/** One handler per kind, each taking its own op: a kind without a handler fails the check. */
export type Handlers = { [K in OpKind]: (op: OpOf<K>) => void };
