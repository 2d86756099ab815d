/**
 * mibyan-jupyter: the "Agent sessions" side panel.
 *
 * Resuming yesterday's session used to mean `%agent sessions`, copying an id and typing
 * `%agent resume ID`. This panel lists the stored sessions over the server's REST API
 * (panelApi.ts), grouped by lineage, searchable on the server (`?q=`), and acts on the selected
 * one: open its transcript read-only, Resume here, export, fork, rename, delete. It refreshes
 * when shown and every few seconds while a listed session runs or waits for an approval.
 */
import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { ICommandPalette, ISanitizer, Notification } from '@jupyterlab/apputils';
import { INotebookTracker } from '@jupyterlab/notebook';
import { IRenderMime } from '@jupyterlab/rendermime';
import { historyIcon } from '@jupyterlab/ui-components';
import type { Message } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import {
  deleteWithConfirm,
  errorText,
  exportDownload,
  forkWithConfirm,
  openTranscript,
  renameWithDialog,
  resumeHere
} from './panelActions';
import { IHit, IListing, ISession } from './panelApi';
import { SessionDetails } from './panelDetails';
import { SEARCH_MAX, courseOffered, fetchListing } from './panelFetch';
import { SessionList } from './panelList';
import { anyActive, groupByLineage, hitsBySession, isOthers } from './panelModel';
import { ViewSwitch } from './panelViews';

export const PANEL_ID = 'mibyan-sessions-panel';
export const OPEN_PANEL_COMMAND = 'mibyan:open-sessions-panel';
/** While a listed session runs, how often the list is fetched again. */
export const POLL_MS = 3000;
const SEARCH_DEBOUNCE_MS = 300;
/** How many sessions (or a search's hits) one "Load more" adds. */
export const PAGE_SIZE = 100;

function plural(count: number, noun: string): string {
  return `${count} ${noun}${count === 1 ? '' : 's'}`;
}

export class SessionsPanel extends Widget {
  constructor(
    private readonly app: JupyterFrontEnd,
    private readonly notebooks: INotebookTracker,
    private readonly sanitizer: IRenderMime.ISanitizer
  ) {
    super();
    this.id = PANEL_ID;
    this.addClass('mibyan-sp');
    this.title.icon = historyIcon;
    this.title.caption = 'Agent sessions';
    this.node.setAttribute('aria-label', 'Agent sessions');
    const header = document.createElement('h2');
    header.className = 'mibyan-sp-header';
    header.textContent = 'Agent sessions';
    this.search = document.createElement('input');
    this.search.type = 'search';
    this.search.className = 'jp-mod-styled mibyan-sp-search';
    this.search.placeholder = 'Search messages…';
    this.search.setAttribute('aria-label', 'Search the sessions’ messages');
    this.search.addEventListener('input', () => {
      this.want = PAGE_SIZE; // a new search starts at its first page
      this.debounceSearch();
    });
    this.search.addEventListener('keydown', event => {
      if (event.key === 'ArrowDown') {
        event.preventDefault();
        this.list.focusCurrent();
      } else if (event.key === 'Enter') {
        clearTimeout(this.searchTimer);
        void this.refresh();
      }
    });
    this.status = document.createElement('div');
    this.status.className = 'mibyan-sp-status';
    this.status.setAttribute('aria-live', 'polite');
    this.views = new ViewSwitch(view => {
      this.want = PAGE_SIZE;
      this.selected = null;
      this.sessions = []; // a failed fetch must not leave the other view's list up
      this.hits = [];
      this.search.hidden = view === 'course'; // the API searches the user's own messages
      void this.refresh();
    });
    this.list = new SessionList({
      select: session => this.select(session),
      // A student's session is the server's to refuse: the Course view only shows details.
      open: session =>
        isOthers(session)
          ? this.select(session)
          : void this.act(() => openTranscript(app, sanitizer, session)),
      more: () => {
        this.want += PAGE_SIZE;
        void this.refresh();
      }
    });
    this.details = new SessionDetails({
      open: s => this.act(() => openTranscript(this.app, this.sanitizer, s)),
      resume: s => this.act(() => resumeHere(this.notebooks, s)),
      exportAs: (s, format) => this.act(() => exportDownload(s, format)),
      fork: s => this.act(async () => this.afterChange(await forkWithConfirm(s))),
      rename: s => this.act(async () => this.afterChange(await renameWithDialog(s))),
      remove: s =>
        this.act(async () => {
          if (await deleteWithConfirm(s)) {
            this.selected = null;
            await this.refresh();
          }
        })
    });
    this.node.append(
      header,
      this.views.node,
      this.search,
      this.status,
      this.list.node,
      this.details.node
    );
  }

  /** Fetch the list (or the search's hits) again and redraw. */
  async refresh(): Promise<void> {
    const ticket = ++this.ticket;
    const view = this.views.view;
    const query = view === 'course' ? '' : this.search.value;
    try {
      if (this.offered === null) {
        this.offered = await courseOffered();
        this.views.offer(this.offered === true);
        if (this.views.view !== view) {
          return; // offer() switched back to the own sessions and refreshes for it
        }
      }
      const listing = await fetchListing(view, query, this.want);
      if (ticket !== this.ticket || this.isDisposed) {
        return; // a newer refresh is on its way
      }
      this.sessions = listing.sessions;
      this.hits = listing.hits;
      this.more = this.moreLabel(query, listing);
      this.status.textContent = query.trim()
        ? `${plural(listing.hits.length, 'matching message')} in ` +
          plural(listing.sessions.length, 'session')
        : plural(listing.total ?? listing.sessions.length, 'session') +
          (view === 'course' ? ' of your students' : '') +
          (this.more === null ? '' : `, newest ${listing.sessions.length} shown`);
      this.status.classList.remove('mibyan-sp-error');
    } catch (error) {
      if (ticket !== this.ticket) {
        return;
      }
      this.status.textContent = `Could not load the sessions: ${errorText(error)}`;
      this.status.classList.add('mibyan-sp-error');
    }
    const empty = query.trim()
      ? 'No session mentions that.'
      : view === 'course'
        ? 'None of your students’ sessions yet.'
        : 'No sessions yet.';
    const selected = this.sessions.find(s => s.id === this.selected?.id) ?? null;
    this.selected = selected;
    // A poll that finds nothing new leaves the DOM alone: no flicker, no click lost mid-way.
    const shown = JSON.stringify([view, query, this.sessions, this.hits, this.more, selected?.id]);
    if (shown !== this.shown) {
      this.shown = shown;
      this.list.render(groupByLineage(this.sessions), selected?.id ?? null, empty, {
        hits: hitsBySession(this.hits),
        more: this.more
      });
      this.details.show(selected);
    }
    this.schedulePoll();
  }

  protected onAfterShow(msg: Message): void {
    super.onAfterShow(msg);
    void this.refresh();
  }

  protected onAfterHide(msg: Message): void {
    super.onAfterHide(msg);
    clearTimeout(this.pollTimer);
  }

  dispose(): void {
    clearTimeout(this.pollTimer);
    clearTimeout(this.searchTimer);
    super.dispose();
  }

  /** The "Load more" row's text, or null when the list holds everything there is. */
  private moreLabel(query: string, listing: IListing): string | null {
    if (query.trim()) {
      const full = listing.hits.length >= this.want && this.want < SEARCH_MAX;
      return full ? 'Load more matches' : null;
    }
    const left = (listing.total ?? 0) - listing.sessions.length;
    return left > 0 ? `Load more (${left} older)` : null;
  }

  private schedulePoll(): void {
    clearTimeout(this.pollTimer);
    if (this.isVisible && anyActive(this.sessions)) {
      this.pollTimer = setTimeout(() => void this.refresh(), POLL_MS);
    }
  }

  private debounceSearch(): void {
    clearTimeout(this.searchTimer);
    this.searchTimer = setTimeout(() => void this.refresh(), SEARCH_DEBOUNCE_MS);
  }

  private select(session: ISession): void {
    this.selected = session;
    this.list.node.querySelectorAll<HTMLElement>('.mibyan-sp-item').forEach(item => {
      item.setAttribute('aria-selected', String(item.dataset.sessionId === session.id));
    });
    this.details.show(session);
  }

  private async afterChange(session: ISession | null): Promise<void> {
    if (session) {
      this.selected = session;
      await this.refresh();
    }
  }

  /** Run an action; its failure is one notification, never an uncaught rejection. */
  private async act(action: () => Promise<unknown>): Promise<void> {
    try {
      const result = await action();
      if (typeof result === 'string') {
        this.details.note(result);
      }
    } catch (error) {
      Notification.error(errorText(error), { autoClose: 8000 });
      this.details.note(errorText(error));
    }
  }

  private readonly views: ViewSwitch;
  private readonly search: HTMLInputElement;
  private readonly status: HTMLElement;
  private readonly list: SessionList;
  private readonly details: SessionDetails;
  private sessions: ISession[] = [];
  private hits: IHit[] = [];
  private more: string | null = null;
  /** How many sessions (or hits) the list holds: grows by a page with each "Load more". */
  private want = PAGE_SIZE;
  private selected: ISession | null = null;
  /** Whether the server offers the Course view; null until it said (asked on refresh). */
  private offered: boolean | null = null;
  private ticket = 0;
  private shown = '';
  private pollTimer: ReturnType<typeof setTimeout> | undefined;
  private searchTimer: ReturnType<typeof setTimeout> | undefined;
}

export const panelPlugin: JupyterFrontEndPlugin<void> = {
  id: 'mibyan-jupyter:sessions-panel',
  description: 'The Agent sessions side panel: search, transcripts, resume, export, fork.',
  autoStart: true,
  requires: [INotebookTracker, ISanitizer],
  optional: [ICommandPalette],
  activate: (
    app: JupyterFrontEnd,
    notebooks: INotebookTracker,
    sanitizer: IRenderMime.ISanitizer,
    palette: ICommandPalette | null
  ): void => {
    const panel = new SessionsPanel(app, notebooks, sanitizer);
    app.shell.add(panel, 'left', { rank: 650 });
    app.commands.addCommand(OPEN_PANEL_COMMAND, {
      label: 'Agent: open sessions panel',
      caption: 'Show the stored agent sessions',
      execute: () => {
        app.shell.activateById(PANEL_ID);
        void panel.refresh();
      }
    });
    palette?.addItem({ command: OPEN_PANEL_COMMAND, category: 'Agent' });
  }
};
