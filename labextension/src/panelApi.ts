/**
 * The sessions REST API as the panel uses it (`/mibyan/api/`, served by mibyan_jupyter/server/).
 *
 * Every request goes through `ServerConnection.makeRequest`, which adds the server's token and
 * the XSRF header JupyterLab needs on POST / PATCH / DELETE, so the panel never handles a
 * credential. Shapes follow the API's contract (SessionJSON and friends); a failed request
 * becomes an `ApiError` carrying the server's one-line `error` text, which the panel shows as is.
 */
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

/** A session's run state as the store and the kernels' leases report it. */
export type SessionStatus = 'idle' | 'running' | 'awaiting_approval' | 'interrupted';

/** How a session came from its parent: a compaction, a fork or a delegated child. */
export type LinkKind = 'fork' | 'compression' | 'child' | 'delegation' | null;

/** One stored session (the API's SessionJSON). */
export interface ISession {
  id: string;
  title: string;
  model: string;
  status: SessionStatus;
  notebook: string | null;
  created_at: number;
  updated_at: number;
  messages: number;
  cost: number | null;
  parent_id: string | null;
  link_kind: LinkKind;
  root_id: string;
  leased: boolean;
  /** Whose session it is: set (from the listing's `owners`) in the Course view only. */
  owner?: string;
}

/** One search hit: where in which session the words were found. */
export interface IHit {
  session_id: string;
  seq: number;
  role: string;
  snippet: string;
  highlights: [number, number][];
  rank: number;
}

/** What a listing or a search returns. */
export interface IListing {
  sessions: ISession[];
  hits: IHit[];
  total: number | null;
}

/** A downloaded export: the file, its name and the server's line on what it includes. */
export interface IExport {
  blob: Blob;
  filename: string;
  includes: string;
}

/** The server refused or failed; `message` is the server's own line when it sent one. */
export class ApiError extends Error {
  constructor(
    message: string,
    readonly status: number,
    readonly code: string
  ) {
    super(message);
  }
}

const BASE = 'mibyan/api/sessions';

async function request(path: string, init: RequestInit = {}): Promise<Response> {
  const settings = ServerConnection.makeSettings();
  const url = URLExt.join(settings.baseUrl, BASE, path);
  const response = await ServerConnection.makeRequest(url, init, settings);
  if (!response.ok) {
    let message = `HTTP ${response.status}`;
    let code = '';
    try {
      const body = (await response.json()) as { error?: unknown; code?: unknown };
      message = typeof body.error === 'string' ? body.error : message;
      code = typeof body.code === 'string' ? body.code : '';
    } catch {
      // not JSON (a proxy's page): keep the status line
    }
    throw new ApiError(message, response.status, code);
  }
  return response;
}

async function json<T>(path: string, init: RequestInit = {}): Promise<T> {
  const response = await request(path, init);
  return (await response.json()) as T;
}

function send(method: string, body: unknown): RequestInit {
  return { method, body: JSON.stringify(body), headers: { 'Content-Type': 'application/json' } };
}

/** The most the API gives in one answer (its `limit` is 1..500). */
export const API_LIMIT_MAX = 500;

/**
 * A page of the newest sessions (`offset` on), or with `query` the sessions whose messages
 * match it (a search has no offset: a longer one asks for a larger `limit`).
 */
export async function listSessions(query: string, limit = 100, offset = 0): Promise<IListing> {
  const q = query.trim();
  const params = q
    ? `?q=${encodeURIComponent(q)}&limit=${limit}`
    : `?limit=${limit}&offset=${offset}`;
  const body = await json<{ sessions: ISession[]; hits?: IHit[]; total?: number }>(params);
  return { sessions: body.sessions, hits: body.hits ?? [], total: body.total ?? null };
}

/** `scope=course`: others' sessions the login role may read (an instructor's students'). */
export interface ICourseListing extends IListing {
  /** The role instructs a course (the roster says so), whether or not it has sessions. */
  instructs: boolean;
}

/**
 * A page of the sessions of the server user's students (team store only: on SQLite the
 * server answers 400), each with its `owner` filled in from the answer's `owners`.
 */
export async function listCourse(limit = 100, offset = 0): Promise<ICourseListing> {
  const body = await json<{
    sessions: ISession[];
    total: number;
    owners: Record<string, string>;
    instructs: boolean;
  }>(`?scope=course&limit=${limit}&offset=${offset}`);
  const sessions = body.sessions.map(s => ({ ...s, owner: body.owners[s.id] ?? '' }));
  return { sessions, hits: [], total: body.total, instructs: body.instructs === true };
}

/** The read-only transcript's HTML (sanitized by the server's renderer). */
export async function getTranscript(id: string): Promise<string> {
  return (await json<{ html: string }>(`${encodeURIComponent(id)}/transcript`)).html;
}

/** The file name a Content-Disposition header gives, else a fallback. */
export function filenameFrom(disposition: string | null, fallback: string): string {
  const match = /filename\*?=(?:UTF-8'')?"?([^";]+)"?/i.exec(disposition ?? '');
  if (!match) {
    return fallback;
  }
  try {
    return decodeURIComponent(match[1]);
  } catch {
    return match[1];
  }
}

export async function exportSession(id: string, format: 'ipynb' | 'md'): Promise<IExport> {
  const response = await request(`${encodeURIComponent(id)}/export?format=${format}`);
  return {
    blob: await response.blob(),
    filename: filenameFrom(response.headers.get('Content-Disposition'), `${id}.${format}`),
    includes: response.headers.get('X-Mibyan-Includes') ?? ''
  };
}

export async function forkSession(id: string): Promise<{ session: ISession; includes: string }> {
  return json(`${encodeURIComponent(id)}/fork`, send('POST', { at: null }));
}

export async function renameSession(id: string, title: string): Promise<ISession> {
  return (await json<{ session: ISession }>(encodeURIComponent(id), send('PATCH', { title })))
    .session;
}

export async function deleteSession(id: string): Promise<void> {
  await request(encodeURIComponent(id), { method: 'DELETE' });
}
