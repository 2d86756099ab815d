/**
 * The selected session's details and actions, under the list.
 *
 * One action bar for the selected session keeps the narrow panel readable and the tab order
 * short (list, then these buttons). A button that cannot act says why in its tooltip and in a
 * visible line (a leased session's Delete), because a disabled button alone explains nothing.
 * A student's session in an instructor's Course view gets no buttons at all: the sessions API
 * serves only the server user's own sessions by id, so each would fail; its details and a
 * line on where to read it are all the panel offers (docs/architecture.md, "Admin policy").
 */
import { ISession } from './panelApi';
import { deleteBlocked, formatCost, formatWhen, isOthers, statusBadge } from './panelModel';

export interface IDetailsActions {
  open(session: ISession): Promise<void>;
  resume(session: ISession): Promise<void>;
  exportAs(session: ISession, format: 'ipynb' | 'md'): Promise<void>;
  fork(session: ISession): Promise<void>;
  rename(session: ISession): Promise<void>;
  remove(session: ISession): Promise<void>;
}

function line(className: string, text: string): HTMLDivElement {
  const node = document.createElement('div');
  node.className = className;
  node.textContent = text;
  return node;
}

export class SessionDetails {
  readonly node: HTMLElement;

  constructor(private readonly actions: IDetailsActions) {
    this.node = document.createElement('section');
    this.node.className = 'mibyan-sp-details';
    this.node.setAttribute('aria-label', 'Selected session');
    this.show(null);
  }

  /** Show the session (or the hint to pick one); another user's has no actions. */
  show(session: ISession | null): void {
    const sameSession = session !== null && session.id === this.session?.id;
    const kept = sameSession ? this.noteLine?.textContent ?? '' : '';
    this.session = session;
    this.node.replaceChildren();
    if (session === null) {
      this.node.appendChild(line('mibyan-sp-hint', 'Select a session to open, resume or export it.'));
      return;
    }
    const badge = statusBadge(session);
    this.node.append(
      line('mibyan-sp-d-title', session.title || session.id),
      line('mibyan-sp-d-id', session.id),
      line(
        'mibyan-sp-d-meta',
        `${session.model} · ${session.messages} messages · ${formatCost(session.cost)} · ` +
          `${badge ? badge.text : 'idle'} · updated ${formatWhen(session.updated_at)}`
      ),
      line('mibyan-sp-d-notebook', session.notebook ?? 'no notebook')
    );
    if (isOthers(session)) {
      this.showReadOnly(session);
      return;
    }
    const bar = document.createElement('div');
    bar.className = 'mibyan-sp-actions';
    bar.setAttribute('role', 'toolbar');
    bar.setAttribute('aria-label', 'Session actions');
    const blocked = deleteBlocked(session);
    bar.append(
      this.button('Open', 'Open the transcript (read-only)', 'open', () =>
        this.actions.open(session)
      ),
      this.button('Resume here', 'Insert and run %agent resume in the active notebook', 'resume', () =>
        this.actions.resume(session)
      ),
      this.button('Export .ipynb', 'Download as a runnable notebook', 'export-ipynb', () =>
        this.actions.exportAs(session, 'ipynb')
      ),
      this.button('Export .md', 'Download as Markdown', 'export-md', () =>
        this.actions.exportAs(session, 'md')
      ),
      this.button('Fork', 'Copy into a new session', 'fork', () => this.actions.fork(session)),
      this.button('Rename', 'Change the title', 'rename', () => this.actions.rename(session)),
      this.button('Delete', blocked ?? 'Delete the session', 'delete', () =>
        this.actions.remove(session)
      , blocked)
    );
    this.node.appendChild(bar);
    if (blocked) {
      this.node.appendChild(line('mibyan-sp-blocked', blocked));
    }
    this.noteLine = line('mibyan-sp-includes', kept);
    this.noteLine.setAttribute('aria-live', 'polite');
    this.node.appendChild(this.noteLine);
  }

  /** Whose session it is, and that it is read here only: no action bar. */
  private showReadOnly(session: ISession): void {
    const owner = session.owner || 'another user';
    this.node.prepend(line('mibyan-sp-d-owner', owner));
    this.node.appendChild(
      line(
        'mibyan-sp-readonly',
        `Read-only: ${owner}’s session. In a notebook, %agent review --user ${owner} ` +
          '--export DIR writes their sessions out to read.'
      )
    );
    this.noteLine = null;
  }

  /** A line under the buttons: what an export includes, or why an action failed. */
  note(text: string): void {
    if (this.noteLine) {
      this.noteLine.textContent = text;
    }
  }

  private button(
    label: string,
    title: string,
    action: string,
    run: () => Promise<void>,
    disabledReason: string | null = null
  ): HTMLButtonElement {
    const node = document.createElement('button');
    node.type = 'button';
    node.className = 'jp-mod-styled mibyan-sp-button';
    node.dataset.action = action;
    node.textContent = label;
    node.title = title;
    node.setAttribute('aria-label', `${label}: ${title}`);
    if (disabledReason) {
      node.disabled = true;
      node.setAttribute('aria-disabled', 'true');
    }
    node.addEventListener('click', () => {
      node.disabled = true;
      run().finally(() => {
        node.disabled = disabledReason !== null;
      });
    });
    return node;
  }

  private session: ISession | null = null;
  private noteLine: HTMLDivElement | null = null;
}
