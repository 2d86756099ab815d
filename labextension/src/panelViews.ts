/**
 * The "My sessions" / "Course" switch above the sessions list, shown to an instructor on the
 * team store only (panelFetch.ts `courseOffered`).
 *
 * An ARIA tablist of two buttons: Left / Right move between them, and the chosen one is the
 * only one in the tab order, as in JupyterLab's own tab bars. The labels are fixed strings;
 * nothing from the store is written here.
 */
import { PanelView } from './panelFetch';

const LABELS: [PanelView, string][] = [
  ['mine', 'My sessions'],
  ['course', 'Course']
];

export class ViewSwitch {
  readonly node: HTMLElement;

  constructor(private readonly changed: (view: PanelView) => void) {
    this.node = document.createElement('div');
    this.node.className = 'mibyan-sp-views';
    this.node.setAttribute('role', 'tablist');
    this.node.setAttribute('aria-label', 'Whose sessions');
    this.node.hidden = true;
    for (const [view, label] of LABELS) {
      const tab = document.createElement('button');
      tab.type = 'button';
      tab.className = 'mibyan-sp-view';
      tab.setAttribute('role', 'tab');
      tab.dataset.view = view;
      tab.textContent = label;
      tab.title =
        view === 'course'
          ? 'Your students’ sessions, read-only (row-level security lets you read them)'
          : 'The sessions you ran';
      tab.addEventListener('click', () => this.choose(view, true));
      tab.addEventListener('keydown', event => this.onKey(event));
      this.node.appendChild(tab);
    }
    this.mark();
  }

  get view(): PanelView {
    return this.current;
  }

  /** Show the switch (an instructor), or hide it and go back to the own sessions. */
  offer(offered: boolean): void {
    this.node.hidden = !offered;
    if (!offered && this.current !== 'mine') {
      this.choose('mine', false);
    }
  }

  private choose(view: PanelView, focus: boolean): void {
    const changed = view !== this.current;
    this.current = view;
    this.mark();
    if (focus) {
      this.tab(view)?.focus();
    }
    if (changed) {
      this.changed(view);
    }
  }

  private mark(): void {
    for (const [view] of LABELS) {
      const tab = this.tab(view);
      if (tab) {
        tab.setAttribute('aria-selected', String(view === this.current));
        tab.tabIndex = view === this.current ? 0 : -1;
      }
    }
  }

  private tab(view: PanelView): HTMLButtonElement | null {
    return this.node.querySelector<HTMLButtonElement>(`[data-view="${view}"]`);
  }

  private onKey(event: KeyboardEvent): void {
    if (event.key === 'ArrowLeft' || event.key === 'ArrowRight') {
      event.preventDefault();
      this.choose(this.current === 'mine' ? 'course' : 'mine', true);
    }
  }

  private current: PanelView = 'mine';
}
