/**
 * mibyan-jupyter: "Insert as cell below" for code the agent wrote or ran, and code actions on
 * the saved transcript's code blocks.
 *
 * The live view (mibyan_jupyter/jupyter/view/static/markdown.js) gives every code block a Copy
 * button and an "Insert as cell below" button, which CSS shows only when this plugin has marked
 * the page (`mibyan-insert-ready` on document.body): without the extension there is nothing to
 * insert with. The button dispatches a bubbling `mibyan-insert-cell` event whose detail holds
 * the code; this plugin finds the notebook cell whose output holds the button and inserts a
 * code cell below it with that source.
 *
 * A saved notebook keeps the run as static HTML (no widget, no script), whose code blocks are
 * `pre.mibyan-code` inside `.mibyan-transcript`: this plugin gives them the same two buttons
 * when they appear, so they come back wherever the extension is installed, and stay plain
 * highlighted code elsewhere. The code is read from the block's text, never run.
 */
import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { INotebookTracker, NotebookActions } from '@jupyterlab/notebook';

/** The event the view's buttons dispatch (markdown.js). */
export const INSERT_EVENT = 'mibyan-insert-cell';
/** On document.body while this plugin runs: the view's CSS shows the insert buttons. */
export const READY_CLASS = 'mibyan-insert-ready';
const SAVED_BLOCKS = '.mibyan-transcript pre.mibyan-code:not(.mibyan-has-actions)';

/** The code an insert event carries, or null for a malformed one. */
function sourceOf(event: Event): string | null {
  const detail = (event as CustomEvent<unknown>).detail;
  if (typeof detail !== 'object' || detail === null) {
    return null;
  }
  const source = (detail as Record<string, unknown>).source;
  return typeof source === 'string' ? source : null;
}

/** Insert a code cell holding `source` below the cell whose node holds `target`. */
function insertBelow(notebooks: INotebookTracker, target: Node, source: string): boolean {
  let done = false;
  notebooks.forEach(panel => {
    const notebook = panel.content;
    const index = done ? -1 : notebook.widgets.findIndex(cell => cell.node.contains(target));
    if (index < 0) {
      return;
    }
    done = true;
    notebook.activeCellIndex = index;
    NotebookActions.insertBelow(notebook);
    NotebookActions.changeCellType(notebook, 'code');
    notebook.activeCell?.model.sharedModel.setSource(source);
  });
  return done;
}

function actionButton(label: string, title: string): HTMLButtonElement {
  const node = document.createElement('button');
  node.type = 'button';
  node.className = 'jp-mod-styled jp-mod-reject';
  node.textContent = label;
  node.title = title;
  node.style.fontSize = 'var(--jp-ui-font-size0, 11px)';
  node.style.height = '20px';
  node.style.lineHeight = '18px';
  node.style.padding = '0 6px';
  return node;
}

/** Copy and Insert buttons on a saved transcript's code block (the live view's own). */
function decorate(pre: HTMLElement): void {
  const source = pre.querySelector('code')?.textContent ?? pre.textContent ?? '';
  pre.classList.add('mibyan-has-actions');
  pre.style.position = 'relative';
  const bar = document.createElement('div');
  bar.className = 'mibyan-code-actions';
  Object.assign(bar.style, { position: 'absolute', top: '2px', right: '2px', display: 'flex' });
  bar.style.gap = '4px';
  const copy = actionButton('Copy', 'Copy the code');
  copy.addEventListener('click', () => {
    navigator.clipboard.writeText(source).then(
      () => (copy.textContent = 'Copied'),
      () => (copy.textContent = 'Copy failed')
    );
    setTimeout(() => (copy.textContent = 'Copy'), 1500);
  });
  const insert = actionButton('Insert as cell below', 'Insert this code as a new cell below');
  insert.classList.add('mibyan-insert');
  insert.addEventListener('click', () => {
    insert.dispatchEvent(
      new CustomEvent(INSERT_EVENT, { bubbles: true, composed: true, detail: { source } })
    );
  });
  bar.append(copy, insert);
  pre.prepend(bar);
}

function decorateAll(root: ParentNode): void {
  root.querySelectorAll<HTMLElement>(SAVED_BLOCKS).forEach(decorate);
}

export const insertPlugin: JupyterFrontEndPlugin<void> = {
  id: 'mibyan-jupyter:insert-cell',
  description: 'Inserts code from a %%agent view as a new cell; code actions on saved runs.',
  autoStart: true,
  requires: [INotebookTracker],
  activate: (_app: JupyterFrontEnd, notebooks: INotebookTracker): void => {
    document.body.classList.add(READY_CLASS);
    document.addEventListener(INSERT_EVENT, event => {
      const source = sourceOf(event);
      const target = event.target;
      if (source === null || !(target instanceof Node)) {
        return;
      }
      try {
        if (insertBelow(notebooks, target, source)) {
          event.stopPropagation();
        }
      } catch (error) {
        console.warn('mibyan-jupyter: inserting the cell failed', error);
      }
    });
    decorateAll(document.body);
    new MutationObserver(mutations => {
      for (const mutation of mutations) {
        mutation.addedNodes.forEach(node => {
          if (node instanceof Element && node.querySelector('.mibyan-transcript')) {
            decorateAll(node);
          } else if (node instanceof Element && node.closest('.mibyan-transcript')) {
            decorateAll(node.closest('.mibyan-transcript') ?? node);
          }
        });
      }
    }).observe(document.body, { childList: true, subtree: true });
  }
};
