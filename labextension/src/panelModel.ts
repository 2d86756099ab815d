/**
 * What the sessions panel shows, computed from the API's sessions with no DOM: lineage groups,
 * badges and the one-line texts. Kept apart from the widget so the rules (which session heads a
 * group, what a leased session may do) read in one place.
 */
import { IHit, ISession } from './panelApi';

/** A lineage: its root (or, when the root is not listed, its newest member) and the rest. */
export interface IGroup {
  head: ISession;
  children: ISession[];
}

/**
 * Sessions grouped under their root (compactions, forks and delegated children share the
 * root's `root_id`), groups in the order their newest member appears in `sessions` (the API
 * lists newest first), children oldest first so a lineage reads in the order it grew.
 */
export function groupByLineage(sessions: ISession[]): IGroup[] {
  const byRoot = new Map<string, ISession[]>();
  for (const session of sessions) {
    const root = session.root_id || session.id;
    const members = byRoot.get(root);
    if (members) {
      members.push(session);
    } else {
      byRoot.set(root, [session]);
    }
  }
  const groups: IGroup[] = [];
  for (const [root, members] of byRoot) {
    const head = members.find(member => member.id === root) ?? members[0];
    const children = members
      .filter(member => member !== head)
      .sort((a, b) => a.created_at - b.created_at);
    groups.push({ head, children });
  }
  return groups;
}

/** Whether a listing needs polling: some session is still doing something. */
export function anyActive(sessions: ISession[]): boolean {
  return sessions.some(s => s.status === 'running' || s.status === 'awaiting_approval');
}

/** The badge a status gets (none for idle). */
export function statusBadge(session: ISession): { text: string; kind: string } | null {
  switch (session.status) {
    case 'running':
      return { text: 'running', kind: 'running' };
    case 'awaiting_approval':
      return { text: 'awaiting approval', kind: 'approval' };
    case 'interrupted':
      return { text: 'interrupted', kind: 'interrupted' };
    default:
      return null;
  }
}

/** How a child came from its parent, in words. */
export function linkLabel(session: ISession): string {
  switch (session.link_kind) {
    case 'compression':
      return 'compacted';
    case 'fork':
      return 'fork';
    case 'child':
    case 'delegation': // a delegated child agent's session (delegate_task)
      return 'delegated';
    default:
      return '';
  }
}

export function formatCost(cost: number | null): string {
  if (cost === null) {
    return 'cost unknown';
  }
  return cost < 0.01 ? `$${cost.toFixed(4)}` : `$${cost.toFixed(2)}`;
}

/** "3 min ago", "yesterday 14:02", or a date: `seconds` are Unix seconds. */
export function formatWhen(seconds: number, now: number = Date.now()): string {
  const ago = Math.max(0, now / 1000 - seconds);
  if (ago < 60) {
    return 'just now';
  }
  if (ago < 3600) {
    return `${Math.floor(ago / 60)} min ago`;
  }
  const date = new Date(seconds * 1000);
  if (ago < 86400) {
    return `${Math.floor(ago / 3600)} h ago`;
  }
  return date.toLocaleDateString(undefined, { year: 'numeric', month: 'short', day: 'numeric' });
}

/**
 * Whether the session is another user's (an instructor's student's, in the Course view): the
 * listing names its owner only there. The panel offers no action on it, since the sessions
 * API serves only the server user's own sessions by id.
 */
export function isOthers(session: ISession): boolean {
  return session.owner !== undefined;
}

/** Why a session cannot be deleted now, or null when it can. */
export function deleteBlocked(session: ISession): string | null {
  if (session.leased) {
    return 'A running kernel holds this session: stop or shut down that kernel to delete it.';
  }
  return null;
}

/** The basename of a notebook path, for a narrow panel. */
export function notebookLabel(path: string | null): string {
  if (!path) {
    return 'no notebook';
  }
  const parts = path.split('/');
  return parts[parts.length - 1] || path;
}

/** One run of a hit's snippet: marked when the search matched it. */
export interface IPiece {
  text: string;
  mark: boolean;
}

/**
 * A snippet cut at its highlights' `[start, end]` offsets (store/search.py gives them in
 * order); offsets out of range or overlapping are clamped, so a bad pair never drops text.
 */
export function highlightPieces(snippet: string, highlights: [number, number][]): IPiece[] {
  const pieces: IPiece[] = [];
  let at = 0;
  for (const [rawStart, rawEnd] of highlights) {
    const start = Math.max(at, Math.min(rawStart, snippet.length));
    const end = Math.max(start, Math.min(rawEnd, snippet.length));
    if (start > at) {
      pieces.push({ text: snippet.slice(at, start), mark: false });
    }
    if (end > start) {
      pieces.push({ text: snippet.slice(start, end), mark: true });
    }
    at = end;
  }
  if (at < snippet.length) {
    pieces.push({ text: snippet.slice(at), mark: false });
  }
  return pieces;
}

/** A search's hits by session id, each session's best first (the API's order). */
export function hitsBySession(hits: IHit[]): Map<string, IHit[]> {
  const bySession = new Map<string, IHit[]>();
  for (const hit of hits) {
    const list = bySession.get(hit.session_id);
    if (list) {
      list.push(hit);
    } else {
      bySession.set(hit.session_id, [hit]);
    }
  }
  return bySession;
}
