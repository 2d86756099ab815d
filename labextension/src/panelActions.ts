/**
 * What the sessions panel's buttons do: resume a session in the active notebook, export,
 * fork, rename, delete, and show a transcript read-only in the main area.
 *
 * Every confirmation is a JupyterLab Dialog, so focus, Enter and Esc behave as everywhere in
 * JupyterLab. Nothing here runs a model: "Resume here" only inserts `%agent resume ID` and runs
 * that cell, which shows the history and makes the notebook's next `%%agent` cells continue it.
 */
import { JupyterFrontEnd } from '@jupyterlab/application';
import { Dialog, InputDialog, MainAreaWidget, Notification, showDialog } from '@jupyterlab/apputils';
import { INotebookTracker, NotebookActions } from '@jupyterlab/notebook';
import { IRenderMime } from '@jupyterlab/rendermime';
import { historyIcon } from '@jupyterlab/ui-components';
import { Widget } from '@lumino/widgets';

import {
  ApiError,
  ISession,
  deleteSession,
  exportSession,
  forkSession,
  getTranscript,
  renameSession
} from './panelApi';
import { deleteBlocked } from './panelModel';

/** A session id as the store writes them (hex); anything else never reaches a cell. */
const SESSION_ID = /^[0-9a-f]{4,64}$/i;

export function errorText(error: unknown): string {
  return error instanceof ApiError || error instanceof Error ? error.message : String(error);
}

/**
 * Insert `%agent resume ID` below the active cell of the active notebook and run it.
 * Returns false (and says why) when no notebook is open.
 */
export async function resumeHere(notebooks: INotebookTracker, session: ISession): Promise<boolean> {
  const panel = notebooks.currentWidget;
  if (!panel) {
    Notification.warning('Open a notebook first: Resume here adds a cell to the active notebook.');
    return false;
  }
  if (!SESSION_ID.test(session.id)) {
    Notification.error(`Not a session id: ${session.id}`);
    return false;
  }
  const notebook = panel.content;
  if (notebook.widgets.length > 0) {
    NotebookActions.insertBelow(notebook);
  } else {
    NotebookActions.insertAbove(notebook);
  }
  NotebookActions.changeCellType(notebook, 'code');
  notebook.activeCell?.model.sharedModel.setSource(`%agent resume ${session.id}`);
  await panel.sessionContext.ready;
  return NotebookActions.run(notebook, panel.sessionContext);
}

/** Download the session as a file; returns the server's line on what the file includes. */
export async function exportDownload(session: ISession, format: 'ipynb' | 'md'): Promise<string> {
  const file = await exportSession(session.id, format);
  const url = URL.createObjectURL(file.blob);
  const link = document.createElement('a');
  link.href = url;
  link.download = file.filename;
  link.style.display = 'none';
  document.body.appendChild(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
  const includes = file.includes || 'the whole session';
  Notification.info(`Exported ${file.filename}: ${includes}`, { autoClose: 8000 });
  return includes;
}

/** Fork after saying what the copy will hold; resolves to the new session, or null. */
export async function forkWithConfirm(session: ISession): Promise<ISession | null> {
  const running = session.status === 'running' || session.status === 'awaiting_approval';
  const body = running
    ? `"${session.title}" is still running: the fork copies its ${session.messages} finished ` +
      'messages; what the run adds later stays in the original only.'
    : `The fork copies all ${session.messages} messages of "${session.title}" into a new ` +
      'session; the original is left as it is.';
  const answer = await showDialog({
    title: 'Fork this session?',
    body,
    buttons: [Dialog.cancelButton(), Dialog.okButton({ label: 'Fork' })]
  });
  if (!answer.button.accept) {
    return null;
  }
  const forked = await forkSession(session.id);
  Notification.success(`Forked into ${forked.session.id}: ${forked.includes}`, {
    autoClose: 8000
  });
  return forked.session;
}

export async function renameWithDialog(session: ISession): Promise<ISession | null> {
  const answer = await InputDialog.getText({
    title: 'Rename the session',
    label: 'Title',
    text: session.title,
    okLabel: 'Rename'
  });
  const title = (answer.value ?? '').trim();
  if (!answer.button.accept || !title || title === session.title) {
    return null;
  }
  return renameSession(session.id, title.slice(0, 200));
}

/** Delete after a confirmation; a leased session is refused before asking. */
export async function deleteWithConfirm(session: ISession): Promise<boolean> {
  const blocked = deleteBlocked(session);
  if (blocked) {
    Notification.warning(blocked);
    return false;
  }
  const answer = await showDialog({
    title: 'Delete this session?',
    body:
      `"${session.title}" and its ${session.messages} messages are removed from the store. ` +
      'Notebooks that show it keep their saved transcript.',
    buttons: [Dialog.cancelButton(), Dialog.warnButton({ label: 'Delete' })]
  });
  if (!answer.button.accept) {
    return false;
  }
  await deleteSession(session.id);
  return true;
}

/** A main-area tab showing a session's transcript, read-only. */
export async function openTranscript(
  app: JupyterFrontEnd,
  sanitizer: IRenderMime.ISanitizer,
  session: ISession
): Promise<void> {
  const id = `mibyan-transcript-${session.id}`;
  for (const widget of app.shell.widgets('main')) {
    if (widget.id === id) {
      app.shell.activateById(id);
      return;
    }
  }
  const html = await getTranscript(session.id);
  const content = new Widget();
  content.addClass('mibyan-sp-transcript');
  content.node.setAttribute('aria-label', `Transcript of ${session.title}`);
  content.node.tabIndex = 0;
  // The server renders it with the export's sanitizer; JupyterLab's sanitizer runs again here.
  content.node.innerHTML = sanitizer.sanitize(html);
  const widget = new MainAreaWidget({ content });
  widget.id = id;
  widget.title.label = session.title || session.id;
  widget.title.caption = `Session ${session.id} (read-only)`;
  widget.title.icon = historyIcon;
  widget.title.closable = true;
  app.shell.add(widget, 'main');
  app.shell.activateById(id);
}
