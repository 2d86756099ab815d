/**
 * mibyan-jupyter notebook tools (`%%agent --tools notebook`): the front end's half.
 *
 * The front end owns the notebook model, so the agent's notebook tools act through it. For each
 * notebook panel this plugin opens a comm on `mibyan_jupyter.notebook` once the panel's kernel is
 * idle (the kernel side registers the target at `%load_ext mibyan_jupyter`:
 * mibyan_jupyter/jupyter/kernel_tools/notebook_comm.py); the last comm opened is the notebook the
 * kernel's tools act on. The kernel closes the comm at once when the target is missing (the
 * extension not loaded yet): then it is opened again after the next cell of the panel ran. A
 * restart drops it and opens a new one when the kernel is idle again.
 *
 * The kernel says `attached` when its side listens (the panel then carries
 * `data-mibyan-notebook-tools="connected"`). On the comm: the kernel's `request` messages (validated and carried out in notebook_tools_ops.ts)
 * are answered with one `reply` each; after every edit of the notebook (debounced) a `sync`
 * message sends each cell's id and source, which the kernel uses for the approval card's diff.
 * Nothing here throws into JupyterLab.
 */
import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { INotebookTracker, NotebookActions, NotebookPanel } from '@jupyterlab/notebook';
import { CommsOverSubshells, Kernel } from '@jupyterlab/services';

import { Json, Refused, apply, snapshot } from './notebook_tools_ops';

/** Comm target the kernel side registers (kernel_tools/notebook_comm.py). */
export const NOTEBOOK_TARGET = 'mibyan_jupyter.notebook';
const SYNC_DELAY_MS = 250;
const REQUEST_ID = /^[\w.-]{1,64}$/;

/** One panel's comm with its kernel. */
class PanelLink {
  private comm: Kernel.IComm | null = null;
  private kernel: Kernel.IKernelConnection | null = null;
  private wanted = true;
  private syncTimer: number | undefined;

  constructor(private readonly panel: NotebookPanel) {
    const context = panel.sessionContext;
    context.statusChanged.connect((_, status) => {
      if (status === 'restarting' || status === 'dead') {
        this.drop();
      } else if (status === 'idle') {
        this.maybeOpen();
      }
    });
    context.kernelChanged.connect(() => {
      this.drop();
      this.maybeOpen();
    });
    panel.context.ready
      .then(() => {
        panel.content.model?.contentChanged.connect(() => this.scheduleSync());
        this.maybeOpen();
      })
      .catch(() => undefined);
    panel.disposed.connect(() => this.close());
  }

  /** A cell of this panel ran: a comm the kernel refused may work now (`%load_ext`). Also
   * when the comm is still there: the kernel's refusal of it may be on its way. */
  cellRan(): void {
    this.wanted = true;
    this.maybeOpen();
  }

  private drop(): void {
    this.comm = null;
    this.kernel = null;
    this.wanted = true;
    this.mark(false);
  }

  /** `data-mibyan-notebook-tools="connected"` on the panel while the kernel side listens. */
  private mark(connected: boolean): void {
    if (connected) {
      this.panel.node.dataset.mibyanNotebookTools = 'connected';
    } else {
      delete this.panel.node.dataset.mibyanNotebookTools;
    }
  }

  private close(): void {
    window.clearTimeout(this.syncTimer);
    this.mark(false);
    const comm = this.comm;
    this.comm = null;
    try {
      if (comm && !comm.isDisposed && this.kernel && !this.kernel.isDisposed) {
        comm.close().done.catch(() => undefined);
      }
    } catch (error) {
      console.debug('mibyan-jupyter: closing the notebook comm failed', error);
    }
  }

  private maybeOpen(): void {
    const kernel = this.panel.sessionContext.session?.kernel;
    const model = this.panel.content.model;
    if (!this.wanted || this.comm || !kernel || !model || kernel.status !== 'idle') {
      return;
    }
    this.wanted = false;
    try {
      const comm = kernel.createComm(NOTEBOOK_TARGET);
      // On the main shell: ipykernel >= 7.4 dispatches it while the %%agent cell awaits its run.
      comm.commsOverSubshells = CommsOverSubshells.Disabled;
      comm.onMsg = msg => this.onMessage(comm, msg.content.data);
      comm.onClose = () => {
        if (this.comm === comm) {
          this.comm = null; // refused (no target yet) or closed by the kernel
          this.mark(false);
          this.maybeOpen(); // only when a cell ran since this one was opened
        }
      };
      this.comm = comm;
      this.kernel = kernel;
      const data = { notebook_path: this.panel.context.path, cells: snapshot(model) };
      comm.open(data as never).done.catch(() => {
        if (this.comm === comm) {
          this.comm = null;
        }
      });
    } catch (error) {
      console.warn('mibyan-jupyter: could not open the notebook comm', error);
      this.comm = null;
    }
  }

  private scheduleSync(): void {
    window.clearTimeout(this.syncTimer);
    this.syncTimer = window.setTimeout(() => this.sync(), SYNC_DELAY_MS);
  }

  private sync(): void {
    const model = this.panel.content.model;
    if (this.comm && !this.comm.isDisposed && model) {
      this.send(this.comm, { type: 'sync', cells: snapshot(model) });
    }
  }

  private send(comm: Kernel.IComm, data: Json): void {
    try {
      comm.send(data as never);
    } catch (error) {
      console.debug('mibyan-jupyter: sending on the notebook comm failed', error);
    }
  }

  /** One message from the kernel: `attached` once, then requests, each validated, carried out
   * and answered. */
  private onMessage(comm: Kernel.IComm, data: unknown): void {
    if (typeof data !== 'object' || data === null) {
      return;
    }
    const { type, id, op, args } = data as Json;
    if (type === 'attached' && this.comm === comm) {
      this.mark(true);
      return;
    }
    if (type !== 'request' || typeof id !== 'string' || !REQUEST_ID.test(id)) {
      return;
    }
    const model = this.panel.content.model;
    let reply: Json;
    try {
      if (!model) {
        throw new Refused('the notebook is not loaded');
      }
      const safeArgs = typeof args === 'object' && args !== null && !Array.isArray(args) ? (args as Json) : {};
      reply = { type: 'reply', id, ok: true, result: apply(model, String(op), safeArgs) };
    } catch (error) {
      const message = error instanceof Refused ? error.message : `the notebook failed: ${String(error)}`;
      reply = { type: 'reply', id, ok: false, error: message };
    }
    this.send(comm, reply);
    if (op !== 'list' && op !== 'read') {
      this.sync(); // the kernel's mirror follows the edit at once
    }
  }
}

export const notebookToolsPlugin: JupyterFrontEndPlugin<void> = {
  id: 'mibyan-jupyter:notebook-tools',
  description: 'Lets the agent (--tools notebook) list, read, insert, edit, delete and run cells.',
  autoStart: true,
  requires: [INotebookTracker],
  activate: (_app: JupyterFrontEnd, notebooks: INotebookTracker): void => {
    const links = new WeakMap<NotebookPanel, PanelLink>();
    const linkFor = (panel: NotebookPanel): PanelLink => {
      let link = links.get(panel);
      if (!link) {
        link = new PanelLink(panel);
        links.set(panel, link);
      }
      return link;
    };
    notebooks.forEach(panel => linkFor(panel));
    notebooks.widgetAdded.connect((_, panel) => {
      try {
        linkFor(panel);
      } catch (error) {
        console.warn('mibyan-jupyter: notebook tools could not watch a notebook', error);
      }
    });
    NotebookActions.executed.connect((_, { notebook }) => {
      const panel = notebooks.find(widget => widget.content === notebook);
      if (panel) {
        links.get(panel)?.cellRan();
      }
    });
    console.log('mibyan-jupyter notebook tools activated');
  }
};
