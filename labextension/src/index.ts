/**
 * mibyan-jupyter: queue a `%%agent` cell for the agent that is already running.
 *
 * A `%%agent` cell awaits its agent run, so while it runs the kernel executes no other cell. When
 * the user runs a second `%%agent` cell alone in the same notebook meanwhile, this plugin opens a
 * comm on target `mibyan_jupyter.queue` (ipykernel >= 7.4 dispatches comm messages while an
 * async cell runs) so the running agent can take the cell's text as a steering message (default)
 * or a follow-up (`--after`). The kernel answers on the comm; when it queued the text, the cell
 * gets a small label until it executes. Anything unexpected (no target in the kernel, no reply in
 * 5 s, a restart) leaves the cell to run later as a normal cell: this plugin never throws into
 * JupyterLab.
 */
import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { Cell, CodeCell } from '@jupyterlab/cells';
import { INotebookTracker, Notebook, NotebookActions, NotebookPanel } from '@jupyterlab/notebook';
import { CommsOverSubshells, Kernel } from '@jupyterlab/services';

import { editorPlugin } from './editor';
import { insertPlugin } from './insert';
import { notebookToolsPlugin } from './notebook_tools';
import { panelPlugin } from './panel';
import { RunTracker, isAgentSource } from './tracker';

/** Comm target the kernel side registers (mibyan_jupyter/jupyter/entry/queue_comm.py). */
export const QUEUE_TARGET = 'mibyan_jupyter.queue';

/** How long to wait for the kernel's answer before giving up. */
const REPLY_TIMEOUT_MS = 5000;

const QUEUED_CLASS = 'mibyan-queued-cell';
const LABEL_CLASS = 'mibyan-queued-label';

/** Sent as the data of `comm_open`. */
interface IQueueRequest {
  [key: string]: string;
  source: string;
  cell_id: string;
  notebook_path: string;
}

/** The kernel's single `comm_msg` on the comm. */
interface IQueueReply {
  queued: boolean;
  mode: 'steer' | 'follow_up';
  reason: string;
}

/** Validate the kernel's message; anything malformed counts as "not queued". */
function parseReply(data: unknown): IQueueReply | null {
  if (typeof data !== 'object' || data === null) {
    return null;
  }
  const { queued, mode, reason } = data as Record<string, unknown>;
  if (typeof queued !== 'boolean') {
    return null;
  }
  return {
    queued,
    mode: mode === 'follow_up' ? 'follow_up' : 'steer',
    reason: typeof reason === 'string' ? reason : ''
  };
}

/**
 * Open the queue comm, wait for one reply, close it. Resolves to null when the target is missing
 * (ipykernel closes the comm at once), on timeout, or on any error.
 */
function askKernel(
  kernel: Kernel.IKernelConnection,
  request: IQueueRequest
): Promise<IQueueReply | null> {
  return new Promise(resolve => {
    let comm: Kernel.IComm | undefined;
    let done = false;
    const finish = (reply: IQueueReply | null): void => {
      if (done) {
        return;
      }
      done = true;
      clearTimeout(timer);
      try {
        if (comm && !comm.isDisposed && !kernel.isDisposed) {
          comm.close().done.catch(() => undefined);
        }
      } catch (error) {
        console.debug('mibyan-jupyter: closing the queue comm failed', error);
      }
      resolve(reply);
    };
    const timer = setTimeout(() => finish(null), REPLY_TIMEOUT_MS);
    try {
      comm = kernel.createComm(QUEUE_TARGET);
      // JupyterLab 4.6 would move this comm to a kernel subshell (a thread) created and deleted
      // for this one exchange; on the main shell, ipykernel >= 7.4 dispatches it while the agent
      // cell awaits, and the kernel side handles it on the loop the agent runs on.
      comm.commsOverSubshells = CommsOverSubshells.Disabled;
      comm.onMsg = msg => finish(parseReply(msg.content.data));
      comm.onClose = () => {
        comm = undefined; // closed by the kernel (e.g. no such target): nothing left to close
        finish(null);
      };
      comm.open(request).done.catch(() => finish(null));
    } catch (error) {
      console.warn('mibyan-jupyter: could not open the queue comm', error);
      finish(null);
    }
  });
}

/** The cell as a code cell (only code cells execute in the kernel). */
function asCodeCell(cell: Cell): CodeCell | null {
  return cell.model.type === 'code' ? (cell as CodeCell) : null;
}

/** Show on the cell that its text went to the running agent. */
function markQueued(cell: CodeCell, mode: IQueueReply['mode']): void {
  unmarkQueued(cell);
  const label = document.createElement('div');
  label.className = LABEL_CLASS;
  label.textContent =
    mode === 'follow_up'
      ? 'queued for the running agent (follow-up, after its current task)'
      : 'queued for the running agent (steering)';
  cell.addClass(QUEUED_CLASS);
  cell.node.appendChild(label);
  // A kernel restart cancels the cell without an "executed" signal; its state still drops.
  const onState = (): void => {
    if (cell.isDisposed || cell.model.executionState !== 'running') {
      cell.model.stateChanged.disconnect(onState);
      unmarkQueued(cell);
    }
  };
  cell.model.stateChanged.connect(onState);
}

function unmarkQueued(cell: Cell): void {
  if (cell.isDisposed) {
    return;
  }
  cell.removeClass(QUEUED_CLASS);
  cell.node.querySelectorAll(`:scope > .${LABEL_CLASS}`).forEach(node => node.remove());
}

/** A tracked cell is live while JupyterLab still shows it as executing. */
function isLive(cell: CodeCell): boolean {
  return !cell.isDisposed && cell.model.executionState === 'running';
}

const queuePlugin: JupyterFrontEndPlugin<void> = {
  id: 'mibyan-jupyter:queue',
  description: 'Queues a lone %%agent cell for the running agent (steering or follow-up).',
  autoStart: true,
  requires: [INotebookTracker],
  activate: (_app: JupyterFrontEnd, notebooks: INotebookTracker): void => {
    const trackers = new WeakMap<Notebook, RunTracker<CodeCell>>();

    const queue = async (
      panel: NotebookPanel,
      tracker: RunTracker<CodeCell>,
      cell: CodeCell
    ): Promise<void> => {
      const kernel = panel.sessionContext.session?.kernel;
      if (!kernel) {
        return;
      }
      const reply = await askKernel(kernel, {
        source: cell.model.sharedModel.getSource(),
        cell_id: cell.model.id,
        notebook_path: panel.context.path
      });
      if (reply?.queued && tracker.isRunning(cell)) {
        markQueued(cell, reply.mode);
      }
    };

    const trackerFor = (notebook: Notebook): RunTracker<CodeCell> | null => {
      let tracker = trackers.get(notebook);
      if (!tracker) {
        const panel = notebooks.find(widget => widget.content === notebook);
        if (!panel) {
          return null;
        }
        const created: RunTracker<CodeCell> = new RunTracker<CodeCell>(cell => {
          queue(panel, created, cell).catch(error =>
            console.warn('mibyan-jupyter: queueing the cell failed', error)
          );
        }, isLive);
        trackers.set(notebook, created);
        tracker = created;
      }
      return tracker;
    };

    NotebookActions.executionScheduled.connect((_, { notebook, cell }) => {
      try {
        const code = asCodeCell(cell);
        if (code) {
          trackerFor(notebook)?.scheduled(code, isAgentSource(code.model.sharedModel.getSource()));
        }
      } catch (error) {
        console.warn('mibyan-jupyter: tracking a scheduled cell failed', error);
      }
    });

    NotebookActions.executed.connect((_, { notebook, cell }) => {
      try {
        const code = asCodeCell(cell);
        if (code) {
          trackers.get(notebook)?.executed(code);
          unmarkQueued(code);
        }
      } catch (error) {
        console.warn('mibyan-jupyter: tracking an executed cell failed', error);
      }
    });

    console.log('mibyan-jupyter queue extension activated');
  }
};

/** Every plugin of the extension; each other file exports its own and is listed here. */
const plugins: JupyterFrontEndPlugin<void>[] = [queuePlugin, insertPlugin, panelPlugin, editorPlugin, notebookToolsPlugin];

export default plugins;
