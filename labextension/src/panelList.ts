/**
 * The sessions list of the panel: lineage groups as an ARIA tree, keyboard first.
 *
 * One item is in the tab order at a time (a roving tabindex): Tab reaches the list once,
 * ArrowUp / ArrowDown move between visible items, ArrowRight / ArrowLeft open and close a
 * lineage, Home / End jump, Enter or Space opens the session's transcript. A search's hits are
 * rows under their session (Enter opens that session's transcript too), and a "Load more" row
 * ends a list the API has more of. Everything is built with textContent and `<mark>` elements:
 * titles, notebook paths and snippets come from the store, i.e. from models and users.
 */
import { IHit, ISession } from './panelApi';
import {
  IGroup,
  formatCost,
  formatWhen,
  isOthers,
  linkLabel,
  notebookLabel,
  statusBadge
} from './panelModel';
import { hitRow, moreRow, span } from './panelRows';

export interface IListCallbacks {
  select(session: ISession): void;
  open(session: ISession): void;
  /** The "Load more" row was chosen: fetch the next page. */
  more(): void;
}

/** What a render shows besides the groups. */
export interface IListExtras {
  /** A search's hits by session id (empty for a plain listing). */
  hits: Map<string, IHit[]>;
  /** The "Load more" row's text, or null when everything is listed. */
  more: string | null;
}

/** Every row the keyboard moves through: sessions, hits and "Load more". */
const ROW = '.mibyan-sp-item, .mibyan-sp-hit, .mibyan-sp-more';

export class SessionList {
  readonly node: HTMLElement;

  constructor(private readonly callbacks: IListCallbacks) {
    this.node = document.createElement('div');
    this.node.className = 'mibyan-sp-list';
    this.node.setAttribute('role', 'tree');
    this.node.setAttribute('aria-label', 'Agent sessions');
    this.node.addEventListener('keydown', event => this.onKey(event));
  }

  /** Lineages whose children are hidden (by root id); kept across refreshes. */
  readonly collapsed = new Set<string>();

  /**
   * Redraw; focus stays on the same row when the list had it. After "Load more" it goes to
   * the first row the new page added, so the keyboard carries on where the list ended.
   */
  render(groups: IGroup[], selected: string | null, empty: string, extras: IListExtras): void {
    const focused = this.node.contains(document.activeElement)
      ? (document.activeElement as HTMLElement).dataset.key
      : undefined;
    const rows = this.visibleItems();
    const lastBefore = rows[rows.length - 2]?.dataset.key;
    this.hits = extras.hits;
    this.sessions = new Map();
    this.node.replaceChildren();
    if (groups.length === 0) {
      this.node.appendChild(span('mibyan-sp-empty', empty));
      return;
    }
    for (const group of groups) {
      this.node.appendChild(this.groupNode(group, selected));
    }
    if (extras.more !== null) {
      this.node.appendChild(this.moreNode(extras.more));
    }
    const items = this.visibleItems();
    let current = items.find(item => item.dataset.key === (focused ?? selected)) ?? items[0];
    if (focused === 'more') {
      const index = items.findIndex(item => item.dataset.key === lastBefore);
      current = items[index + 1] ?? current;
    }
    current.tabIndex = 0;
    if (focused !== undefined) {
      current.focus();
    }
  }

  /** Put the focus on the list's row in the tab order (from the search box's ArrowDown). */
  focusCurrent(): void {
    this.node.querySelector<HTMLElement>(`:is(${ROW})[tabindex="0"]`)?.focus();
  }

  private groupNode(group: IGroup, selected: string | null): HTMLElement {
    const root = group.head.root_id || group.head.id;
    const node = document.createElement('div');
    node.className = 'mibyan-sp-group';
    node.setAttribute('role', 'none');
    const head = this.itemNode(group.head, 1, selected);
    node.append(head, ...this.hitNodes(group.head, 2));
    if (group.children.length > 0) {
      const open = !this.collapsed.has(root);
      head.setAttribute('aria-expanded', String(open));
      const toggle = span('mibyan-sp-toggle', open ? '▾' : '▸');
      toggle.setAttribute('aria-hidden', 'true');
      toggle.title = open ? 'Hide this lineage' : `Show ${group.children.length} more`;
      toggle.addEventListener('click', event => {
        event.stopPropagation();
        this.toggle(root, head);
      });
      head.querySelector('.mibyan-sp-title')?.prepend(toggle);
      const children = document.createElement('div');
      children.className = 'mibyan-sp-children';
      children.setAttribute('role', 'group');
      children.hidden = !open;
      for (const child of group.children) {
        children.append(this.itemNode(child, 2, selected), ...this.hitNodes(child, 3));
      }
      node.appendChild(children);
    }
    return node;
  }

  private itemNode(session: ISession, level: number, selected: string | null): HTMLElement {
    this.sessions.set(session.id, session);
    const item = document.createElement('div');
    item.className = 'mibyan-sp-item';
    item.setAttribute('role', 'treeitem');
    item.setAttribute('aria-level', String(level));
    item.setAttribute('aria-selected', String(session.id === selected));
    item.dataset.sessionId = session.id;
    item.dataset.key = session.id;
    item.dataset.status = session.status;
    item.tabIndex = -1;
    const title = span('mibyan-sp-title', session.title || session.id);
    const badges = span('mibyan-sp-badges', '');
    const link = linkLabel(session);
    if (level > 1 && link) {
      badges.appendChild(span('mibyan-sp-badge mibyan-sp-link', link));
    }
    const badge = statusBadge(session);
    if (badge) {
      badges.appendChild(span(`mibyan-sp-badge mibyan-sp-status-${badge.kind}`, badge.text));
    }
    const meta = span(
      'mibyan-sp-meta',
      [session.model, formatCost(session.cost), notebookLabel(session.notebook)].join(' · ')
    );
    if (isOthers(session)) {
      // The Course view: whose session it is leads the line (a login role: plain text).
      meta.prepend(span('mibyan-sp-owner', session.owner || 'unknown'), ' · ');
    }
    const when = span('mibyan-sp-when', formatWhen(session.updated_at));
    item.title = `${session.title}\n${session.id}\n${session.notebook ?? 'no notebook'}`;
    item.setAttribute(
      'aria-label',
      `${session.title || session.id}, ${badge ? badge.text + ', ' : ''}${meta.textContent}`
    );
    item.append(title, badges, meta, when);
    item.addEventListener('click', () => this.choose(item));
    item.addEventListener('dblclick', () => this.callbacks.open(session));
    return item;
  }

  private hitNodes(session: ISession, level: number): HTMLElement[] {
    return (this.hits.get(session.id) ?? []).map(hit => {
      const row = hitRow(session, hit, level);
      row.addEventListener('click', () => {
        this.choose(row);
        this.callbacks.open(session);
      });
      return row;
    });
  }

  private moreNode(label: string): HTMLElement {
    const row = moreRow(label);
    row.addEventListener('click', () => {
      this.choose(row);
      this.callbacks.more();
    });
    return row;
  }

  /** The session a row stands for: its own, or the one a hit was found in. */
  private sessionOf(row: HTMLElement): ISession | undefined {
    return this.sessions.get(row.dataset.sessionId ?? row.dataset.hitSession ?? '');
  }

  private choose(item: HTMLElement): void {
    this.node.querySelectorAll<HTMLElement>(ROW).forEach(other => {
      other.tabIndex = other === item ? 0 : -1;
    });
    item.focus();
    const session = this.sessionOf(item);
    if (session) {
      this.callbacks.select(session);
    }
  }

  private toggle(root: string, head: HTMLElement): void {
    if (this.collapsed.has(root)) {
      this.collapsed.delete(root);
    } else {
      this.collapsed.add(root);
    }
    const children = head.parentElement?.querySelector<HTMLElement>('.mibyan-sp-children');
    if (children) {
      children.hidden = this.collapsed.has(root);
      head.setAttribute('aria-expanded', String(!children.hidden));
      const toggle = head.querySelector('.mibyan-sp-toggle');
      if (toggle) {
        toggle.textContent = children.hidden ? '▸' : '▾';
      }
    }
  }

  private visibleItems(): HTMLElement[] {
    return Array.from(this.node.querySelectorAll<HTMLElement>(ROW)).filter(
      item => !item.closest('.mibyan-sp-children[hidden]')
    );
  }

  private onKey(event: KeyboardEvent): void {
    const item = (event.target as HTMLElement).closest<HTMLElement>(ROW);
    if (!item) {
      return;
    }
    const items = this.visibleItems();
    const index = items.indexOf(item);
    const session = this.sessionOf(item);
    const expanded = item.getAttribute('aria-expanded');
    let next: HTMLElement | undefined;
    switch (event.key) {
      case 'ArrowDown':
        next = items[Math.min(items.length - 1, index + 1)];
        break;
      case 'ArrowUp':
        next = items[Math.max(0, index - 1)];
        break;
      case 'Home':
        next = items[0];
        break;
      case 'End':
        next = items[items.length - 1];
        break;
      case 'ArrowRight':
      case 'ArrowLeft':
        if (expanded !== null && (expanded === 'true') === (event.key === 'ArrowLeft')) {
          this.toggle(session?.root_id || item.dataset.sessionId || '', item);
        } else if (event.key === 'ArrowLeft' && item.dataset.hitSession) {
          next = items.find(row => row.dataset.key === item.dataset.hitSession);
        } else if (event.key === 'ArrowLeft' && item.getAttribute('aria-level') === '2') {
          next =
            item.closest('.mibyan-sp-group')?.querySelector<HTMLElement>('.mibyan-sp-item') ??
            undefined;
        }
        break;
      case 'Enter':
      case ' ':
        if (item.dataset.key === 'more') {
          this.callbacks.more();
        } else if (session) {
          this.choose(item);
          this.callbacks.open(session);
        }
        break;
      default:
        return;
    }
    event.preventDefault();
    event.stopPropagation();
    if (next) {
      this.choose(next);
    }
  }

  private sessions = new Map<string, ISession>();
  private hits = new Map<string, IHit[]>();
}
