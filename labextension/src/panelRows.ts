/**
 * The sessions list's rows that are not sessions: a search's hits and the "Load more" row.
 *
 * A hit's snippet is the message's text verbatim (store/search.py keeps `sales["year"]` and
 * `<b>html</b>` as they were) and its highlights are offsets, so the row is built from text
 * nodes and `<mark>` elements only: no markup in a snippet can become an element. The list
 * (panelList.ts) wires the clicks and the keyboard; these only build the nodes.
 */
import { IHit, ISession } from './panelApi';
import { highlightPieces } from './panelModel';

export function span(className: string, text: string): HTMLSpanElement {
  const node = document.createElement('span');
  node.className = className;
  node.textContent = text;
  return node;
}

/** The snippet with its matched words in `<mark>`s, everything else plain text. */
export function markedSnippet(hit: IHit): HTMLSpanElement {
  const snippet = span('mibyan-sp-snippet', '');
  for (const piece of highlightPieces(hit.snippet, hit.highlights)) {
    if (piece.mark) {
      const mark = document.createElement('mark');
      mark.textContent = piece.text;
      snippet.appendChild(mark);
    } else {
      snippet.appendChild(document.createTextNode(piece.text));
    }
  }
  return snippet;
}

/** A hit as a tree row one level below its session: the role, then the snippet. */
export function hitRow(session: ISession, hit: IHit, level: number): HTMLElement {
  const row = document.createElement('div');
  row.className = 'mibyan-sp-hit';
  row.setAttribute('role', 'treeitem');
  row.setAttribute('aria-level', String(level));
  row.dataset.hitSession = session.id;
  row.dataset.key = `hit:${session.id}:${hit.seq}`;
  row.dataset.seq = String(hit.seq);
  row.tabIndex = -1;
  row.append(span('mibyan-sp-role', hit.role), markedSnippet(hit));
  row.title = `Open the transcript of ${session.title || session.id}`;
  row.setAttribute('aria-label', `${hit.role}: ${hit.snippet}`);
  return row;
}

/** The row that ends a list the API has more of; `label` says how many are left. */
export function moreRow(label: string): HTMLElement {
  const row = document.createElement('div');
  row.className = 'mibyan-sp-more';
  row.setAttribute('role', 'treeitem');
  row.setAttribute('aria-level', '1');
  row.dataset.key = 'more';
  row.tabIndex = -1;
  row.textContent = label;
  return row;
}
