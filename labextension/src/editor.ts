/**
 * mibyan-jupyter: editor support for `%%agent` cells and the Agent palette commands.
 *
 * A `%%agent` cell is a code cell whose body is a prompt, not Python, so Python highlighting
 * paints it as errors. JupyterLab picks a cell editor's language from the cell model's MIME
 * type (the notebook sets the kernel's on every code cell), so this plugin registers a language
 * for `AGENT_MIME` (editorLanguage.ts) and gives a cell that MIME type while its source starts
 * with `%%agent`, and the notebook's own back when it stops doing so. Nothing is saved: the
 * MIME type is not part of the notebook file.
 */
import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { ICommandPalette, Notification } from '@jupyterlab/apputils';
import { ICellModel } from '@jupyterlab/cells';
import { IEditorLanguageRegistry } from '@jupyterlab/codemirror';
import { INotebookTracker, Notebook, NotebookActions, NotebookPanel } from '@jupyterlab/notebook';

import { AGENT_MIME, agentLanguage } from './editorLanguage';
import { stopAgent } from './editorStop';
import { isAgentSource } from './tracker';

export const COMMANDS = {
  newSession: 'mibyan:new-session',
  stop: 'mibyan:stop',
  insertCell: 'mibyan:insert-agent-cell'
};

/** Give one code cell the agent language while it is an agent cell, else the notebook's. */
function syncMime(notebook: Notebook, cell: ICellModel): void {
  if (cell.type !== 'code') {
    return;
  }
  const agent = isAgentSource(cell.sharedModel.getSource());
  if (agent && cell.mimeType !== AGENT_MIME) {
    cell.mimeType = AGENT_MIME;
  } else if (!agent && cell.mimeType === AGENT_MIME) {
    cell.mimeType = notebook.codeMimetype;
  }
}

/** Follow every cell of a notebook, the ones added later included. */
function watchNotebook(panel: NotebookPanel, watched: WeakSet<ICellModel>): void {
  const notebook = panel.content;
  const watch = (): void => {
    const cells = notebook.model?.cells;
    if (!cells) {
      return;
    }
    for (let i = 0; i < cells.length; i++) {
      const cell = cells.get(i);
      if (!watched.has(cell)) {
        watched.add(cell);
        cell.sharedModel.changed.connect(() => syncMime(notebook, cell));
        // The notebook resets every code cell's MIME type (new cell, kernel change): re-apply.
        cell.mimeTypeChanged.connect(() => syncMime(notebook, cell));
      }
      syncMime(notebook, cell);
    }
  };
  void panel.context.ready.then(() => {
    watch();
    notebook.model?.cells.changed.connect(watch);
  });
}

/** Insert a code cell below the active one with `source`, and leave the cursor at its end. */
function insertAgentCell(notebooks: INotebookTracker, source: string): boolean {
  const panel = notebooks.currentWidget;
  if (!panel) {
    Notification.warning('Open a notebook first.');
    return false;
  }
  const notebook = panel.content;
  NotebookActions.insertBelow(notebook);
  NotebookActions.changeCellType(notebook, 'code');
  const cell = notebook.activeCell;
  if (!cell) {
    return false;
  }
  cell.model.sharedModel.setSource(source);
  const lines = source.split('\n');
  const edit = (): void => {
    if (cell.isDisposed || notebook.activeCell !== cell) {
      return;
    }
    notebook.mode = 'edit';
    cell.editor?.setCursorPosition({
      line: lines.length - 1,
      column: lines[lines.length - 1].length
    });
    cell.editor?.focus();
  };
  edit();
  // Run from the command palette, the palette gives the focus back to the notebook when it
  // closes, after this command: edit again once that has happened.
  requestAnimationFrame(() => setTimeout(edit, 0));
  return true;
}

export const editorPlugin: JupyterFrontEndPlugin<void> = {
  id: 'mibyan-jupyter:editor',
  description: 'Highlights %%agent cells (magic line + Markdown) and adds the Agent commands.',
  autoStart: true,
  requires: [INotebookTracker, IEditorLanguageRegistry],
  optional: [ICommandPalette],
  activate: (
    app: JupyterFrontEnd,
    notebooks: INotebookTracker,
    languages: IEditorLanguageRegistry,
    palette: ICommandPalette | null
  ): void => {
    languages.addLanguage({
      name: 'mibyan-agent',
      displayName: '%%agent prompt',
      mime: AGENT_MIME,
      extensions: [],
      support: agentLanguage(),
      load: async () => agentLanguage()
    });
    const watched = new WeakSet<ICellModel>();
    notebooks.forEach(panel => watchNotebook(panel, watched));
    notebooks.widgetAdded.connect((_, panel) => watchNotebook(panel, watched));

    const hasNotebook = (): boolean => notebooks.currentWidget !== null;
    app.commands.addCommand(COMMANDS.insertCell, {
      label: 'Agent: insert %%agent cell',
      caption: 'A new %%agent cell below the active cell (this notebook’s session)',
      isEnabled: hasNotebook,
      execute: () => insertAgentCell(notebooks, '%%agent\n')
    });
    app.commands.addCommand(COMMANDS.newSession, {
      label: 'Agent: new session',
      caption: 'A %%agent cell that starts a new session (type the prompt, then run it)',
      isEnabled: hasNotebook,
      execute: () => insertAgentCell(notebooks, '%%agent --session new\n')
    });
    app.commands.addCommand(COMMANDS.stop, {
      label: 'Agent: stop',
      caption: 'Stop the agent running in this notebook’s kernel (%agent stop)',
      isEnabled: hasNotebook,
      execute: () => stopAgent(notebooks.currentWidget)
    });
    for (const command of [COMMANDS.newSession, COMMANDS.insertCell, COMMANDS.stop]) {
      palette?.addItem({ command, category: 'Agent' });
    }
  }
};
