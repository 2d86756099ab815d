/**
 * How the sessions panel fills its list: the server user's own sessions (or a search's hits)
 * and, on the team store, an instructor's students' sessions (the Course view).
 *
 * Every refresh fetches the first `want` sessions again from offset 0, in as many pages as
 * the API's limit needs, so a poll sees a session that moved between pages and lineage groups
 * are formed over the whole list. Whether the Course view exists at all is the server's word
 * (`scope=course` answers `instructs`), never guessed from what a listing happens to hold.
 */
import { API_LIMIT_MAX, ApiError, IListing, ISession, listCourse, listSessions } from './panelApi';

/** The two lists the panel can show. */
export type PanelView = 'mine' | 'course';

/** A search has no offset in the API: it grows by its `limit`, up to the API's most. */
export const SEARCH_MAX = API_LIMIT_MAX;

type PageOf = (limit: number, offset: number) => Promise<IListing>;

/** The first `want` sessions of `pageOf`'s listing, each once. */
async function allPages(pageOf: PageOf, want: number): Promise<IListing> {
  const first = await pageOf(Math.min(want, API_LIMIT_MAX), 0);
  const sessions: ISession[] = [...first.sessions];
  while (sessions.length < want && sessions.length < (first.total ?? 0)) {
    const page = await pageOf(Math.min(want - sessions.length, API_LIMIT_MAX), sessions.length);
    if (page.sessions.length === 0) {
      break;
    }
    sessions.push(...page.sessions);
  }
  // A session updated between two pages' requests moves up and may come twice: keep it once.
  const unique = new Map(sessions.map(s => [s.id, s]));
  return { sessions: [...unique.values()], hits: [], total: first.total };
}

/**
 * What the list shows: in the Course view the students' sessions (no search there: the
 * API's search is the user's own messages), else the own sessions or the search's hits.
 */
export async function fetchListing(view: PanelView, query: string, want: number): Promise<IListing> {
  if (view === 'course') {
    return allPages((limit, offset) => listCourse(limit, offset), want);
  }
  if (query.trim()) {
    return listSessions(query, Math.min(want, SEARCH_MAX));
  }
  return allPages((limit, offset) => listSessions('', limit, offset), want);
}

/**
 * Whether to offer the Course view: true for an instructor on the team store; false on
 * SQLite (the server answers 400: no roster there) and for a student; null when the server
 * could not say now (asked again on the next refresh).
 */
export async function courseOffered(): Promise<boolean | null> {
  try {
    return (await listCourse(1, 0)).instructs;
  } catch (error) {
    if (error instanceof ApiError && error.status === 400) {
      return false;
    }
    return null;
  }
}
