/**
 * Which `%%agent` cells of one notebook are running, and which runs were started alone.
 *
 * Why this exists: a `%%agent` cell awaits its agent run, so the kernel executes nothing else
 * until the run ends. A second `%%agent` cell the user runs meanwhile would only wait in the
 * kernel's queue; the plugin instead tells the kernel about it at once so the running agent can
 * take its text as a steering or follow-up message. That must only happen for a cell the user
 * ran on its own: "Run All" or "Run selected cells" schedule several cells in the same JS task,
 * and those cells must keep their normal order. This module holds that bookkeeping and nothing
 * JupyterLab-specific, so it stays small and easy to reason about.
 */

/** A cell whose source starts, after leading whitespace, with the `%%agent` cell magic. */
const AGENT_CELL = /^\s*%%agent(?:\s|$)/;

/** True when the source is a `%%agent` cell (not `%%agents` or `%agent`). */
export function isAgentSource(source: string): boolean {
  return AGENT_CELL.test(source);
}

/** Called when an agent cell was scheduled alone while other agent cells are running. */
export type AloneHandler<C> = (cell: C, running: C[]) => void;

/** Runs a callback once the current task and its microtasks are over. */
export type Defer = (callback: () => void) => void;

/**
 * Tracks running agent cells of one notebook and detects cells scheduled alone.
 *
 * A cell counts as running from `scheduled()` until `executed()`. Every scheduled cell (agent or
 * not) joins the current batch; the batch is closed by a deferred callback (a macrotask by
 * default), because JupyterLab schedules all cells of one "run" command synchronously.
 */
export class RunTracker<C> {
  /**
   * @param onAlone - called for an agent cell that was the only cell of its batch while at least
   *   one other agent cell is still running.
   * @param isLive - lets the caller drop stale entries (e.g. a run cancelled by a kernel restart
   *   emits no "executed" signal).
   * @param defer - closes the batch; `setTimeout(0)` outlives the microtasks of the scheduling
   *   code.
   */
  constructor(
    private readonly onAlone: AloneHandler<C>,
    private readonly isLive: (cell: C) => boolean = () => true,
    private readonly defer: Defer = callback => setTimeout(callback, 0)
  ) {}

  /** Record that a cell was scheduled; `isAgent` tells whether its source is `%%agent`. */
  scheduled(cell: C, isAgent: boolean): void {
    if (isAgent) {
      this._running.add(cell);
    }
    this._batch.push({ cell, isAgent });
    if (this._batch.length === 1) {
      this.defer(() => this._closeBatch());
    }
  }

  /** Record that a cell finished (successfully or not). */
  executed(cell: C): void {
    this._running.delete(cell);
  }

  /** Agent cells still running, other than `except`. */
  runningAgents(except?: C): C[] {
    const live: C[] = [];
    for (const cell of this._running) {
      if (!this.isLive(cell)) {
        this._running.delete(cell);
      } else if (cell !== except) {
        live.push(cell);
      }
    }
    return live;
  }

  /** Whether the cell is still counted as running. */
  isRunning(cell: C): boolean {
    return this._running.has(cell) && this.isLive(cell);
  }

  private _closeBatch(): void {
    const batch = this._batch;
    this._batch = [];
    if (batch.length !== 1 || !batch[0].isAgent) {
      return;
    }
    const cell = batch[0].cell;
    if (!this.isRunning(cell)) {
      return;
    }
    const others = this.runningAgents(cell);
    if (others.length > 0) {
      this.onAlone(cell, others);
    }
  }

  private _running = new Set<C>();
  private _batch: { cell: C; isAgent: boolean }[] = [];
}
