// When a kernel dies: a notification with the cause, the cell and the peak memory, the
// running cell marked, the report one click away. New deaths come on the server's event bus;
// a poll catches what the bus missed (and what died while no browser was open).
import { JupyterFrontEnd } from '@jupyterlab/application';
import { Clipboard, MainAreaWidget, Notification, showDialog, Dialog } from '@jupyterlab/apputils';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { SplitPanel, Widget } from '@lumino/widgets';

import * as api from './api';

const LAST_SEEN_KEY = 'kernel-watchdog:last-seen-ms';
const POLL_MS = 10_000;

function firstLine(code: string): string {
  return (code.split('\n').find(l => l.trim()) || '').trim();
}

export function cellLabel(s: api.IReportSummary): string | null {
  if (!s.cell) {
    return null;
  }
  const count = s.cell.execution_count;
  const label = count !== null && count !== undefined ? `cell [${count}]` : 'a cell';
  const line = firstLine(s.cell.code);
  return line ? `${label}: ${line}` : label;
}

function notebookName(s: api.IReportSummary): string {
  return s.notebook ? s.notebook.split('/').pop() || s.notebook : 'a notebook';
}

// JupyterLab cuts a notification's message at 140 characters: the cause comes first, cut
// itself only as far as the cell and the peak memory need.
const MESSAGE_LIMIT = 140;

function cut(text: string, limit: number): string {
  return text.length <= limit ? text : text.slice(0, Math.max(0, limit - 1)) + '…';
}

// The notification's words (the whole story is in "Copy summary" and the report).
export function describe(s: api.IReportSummary): string {
  const nb = notebookName(s);
  if (!s.readable) {
    const file = (s.path || '').split('/').pop() || '?';
    return cut(`${nb}: the kernel died; its report ${file} could not be read (${s.headline || '?'})`, MESSAGE_LIMIT);
  }
  const what = s.kind === 'hang' ? 'kernel stopped answering' : 'kernel died';
  const tail: string[] = [];
  const cell = cellLabel(s);
  if (cell) {
    tail.push(cut(cell, 40));
  }
  if (s.peak_rss_bytes) {
    tail.push(`peak ${api.formatBytes(s.peak_rss_bytes)}`);
  }
  const end = tail.length ? ` · ${tail.join(' · ')}` : '';
  const head = `${nb} ${what}: ${s.headline || s.ended || 'see the report'}`;
  return cut(head, MESSAGE_LIMIT - end.length) + end;
}

// "Copy summary": everything, in full.
function summaryText(s: api.IReportSummary): string {
  const lines = [`The kernel of ${notebookName(s)} died: ${s.headline || s.ended || '?'}`];
  const cell = cellLabel(s);
  if (cell) {
    lines.push(`Running ${cell}`);
  }
  if (s.peak_rss_bytes) {
    lines.push(`Peak memory ${api.formatBytes(s.peak_rss_bytes)}`);
  }
  if (s.first_remedy) {
    lines.push(`What to do: ${s.first_remedy}`);
  }
  lines.push(`Report: ${s.path} (kernel-watchdog reports show ${s.id})`);
  return lines.join('\n');
}

class ReportView extends Widget {
  constructor(page: string) {
    super();
    const frame = document.createElement('iframe');
    // No scripts, no same origin: the page can run nothing and reach nothing.
    frame.setAttribute('sandbox', '');
    frame.className = 'kwd-report-frame';
    frame.srcdoc = page;
    this.node.appendChild(frame);
    this.addClass('kwd-report');
  }
}

export class DeathWatcher {
  private shown = new Set<string>();
  private lastSeen: number;

  constructor(
    private app: JupyterFrontEnd,
    private notebooks: INotebookTracker | null
  ) {
    this.lastSeen = Number(window.localStorage.getItem(LAST_SEEN_KEY) || '0');
  }

  start(): void {
    this.app.serviceManager.events.stream.connect((_, event) => {
      if (event.schema_id === api.DEATH_EVENT && typeof event.id === 'string') {
        void this.announceId(event.id as string);
      }
    });
    void this.poll();
    window.setInterval(() => void this.poll(), POLL_MS);
  }

  async openReport(s: api.IReportSummary): Promise<void> {
    const id = `kernel-watchdog-report-${s.id}`;
    const notebook7 = this.app.name === 'Jupyter Notebook';
    for (const open of this.app.shell.widgets(notebook7 ? 'down' : 'main')) {
      if (open.id === id) {
        this.app.shell.activateById(id);
        return;
      }
    }
    const page = await api.reportPage(s.id);
    const content = new ReportView(page);
    const widget = new MainAreaWidget({ content });
    widget.id = id;
    widget.title.label = `Why ${notebookName(s)} died`;
    widget.title.closable = true;
    // Notebook 7's main area holds the page's one document and takes no second widget; its
    // down panel (where its log console opens) shows the report under the notebook, inside
    // the app. JupyterLab: a tab of the main area.
    this.app.shell.add(widget, notebook7 ? 'down' : 'main');
    this.app.shell.activateById(widget.id);
    if (notebook7) {
      // The down panel opens with no height of its own (Notebook 7 keeps none for it): the
      // split between notebook and panel gives the report most of the page.
      const split = widget.parent?.parent?.parent;
      if (split instanceof SplitPanel && split.orientation === 'vertical') {
        split.setRelativeSizes([0.4, 0.6]);
      }
    }
  }

  private async poll(): Promise<void> {
    try {
      const since = this.lastSeen;
      const answer = await api.reportsSince(since);
      if (!since) {
        // The first visit: what died before it is not news.
        this.remember(answer.now_ms);
        return;
      }
      for (const s of [...answer.reports].reverse()) {
        this.announce(s);
      }
    } catch (e) {
      console.debug('kernel-watchdog: poll failed', e);
    }
  }

  private remember(atMs: number): void {
    if (atMs > this.lastSeen) {
      this.lastSeen = atMs;
      window.localStorage.setItem(LAST_SEEN_KEY, String(atMs));
    }
  }

  private async announceId(id: string): Promise<void> {
    if (this.shown.has(id)) {
      return;
    }
    try {
      this.announce(await api.report(id));
    } catch (e) {
      console.warn('kernel-watchdog: report', id, e);
    }
  }

  private announce(s: api.IReportSummary): void {
    if (this.shown.has(s.id)) {
      return;
    }
    this.shown.add(s.id);
    this.remember(s.at_ms || 0);
    this.markCell(s);
    const actions: Notification.IAction[] = [
      {
        label: 'Open report',
        caption: 'The crash report in a tab',
        callback: () => void this.openReport(s)
      },
      {
        label: 'Copy summary',
        caption: 'Cause, cell, peak memory and the report path, as text',
        callback: (event: MouseEvent) => {
          // The notification stays: the report may still be wanted.
          event.preventDefault();
          Clipboard.copyToSystem(summaryText(s));
        }
      }
    ];
    const step = s.first_action;
    if (step && (step.kind === 'copy' || step.kind === 'insert_cell')) {
      actions.push({
        label: step.label,
        caption: s.first_remedy || step.label,
        callback: (event: MouseEvent) => {
          if (step.kind === 'copy') {
            event.preventDefault();
            Clipboard.copyToSystem(step.text);
          } else if (!this.insertFirstCell(s, step.text)) {
            // No open notebook of that kernel: the cell's code, to paste.
            event.preventDefault();
            Clipboard.copyToSystem(step.text);
            Notification.info('The notebook is not open: the cell was copied instead', {
              autoClose: 4000
            });
          }
        }
      });
    }
    if (s.first_remedy) {
      actions.push({
        label: 'What to do',
        callback: () =>
          void showDialog({
            title: 'What to do',
            body: s.first_remedy || '',
            buttons: [Dialog.okButton()]
          })
      });
    }
    Notification.error(describe(s), { autoClose: false, actions });
  }

  // The notebook panels of the report's kernel (or, once it restarted, of its notebook).
  private panelsOf(s: api.IReportSummary): NotebookPanel[] {
    const found: NotebookPanel[] = [];
    this.notebooks?.forEach(panel => {
      const kernel = panel.sessionContext.session?.kernel;
      const samePath = s.notebook && panel.context.path === s.notebook;
      if ((kernel && kernel.id === s.kernel_id) || samePath) {
        found.push(panel);
      }
    });
    return found;
  }

  // A remedy's setting as the notebook's first code cell, selected (not run: the kernel must
  // be restarted first, which the user does).
  private insertFirstCell(s: api.IReportSummary, code: string): boolean {
    const [panel] = this.panelsOf(s);
    if (!panel) {
      return false;
    }
    panel.model?.sharedModel.insertCell(0, { cell_type: 'code', source: code });
    panel.content.activeCellIndex = 0;
    this.app.shell.activateById(panel.id);
    return true;
  }

  // The cell that was running gets a mark (a class, not an output).
  private markCell(s: api.IReportSummary): void {
    if (!this.notebooks || !s.cell) {
      return;
    }
    this.panelsOf(s).forEach(panel => {
      const code = s.cell!.code;
      for (const cell of panel.content.widgets) {
        if (cell.model.type === 'code' && cell.model.sharedModel.getSource() === code) {
          cell.addClass('kwd-died-here');
          cell.node.title = `The kernel died while this cell ran: ${s.headline || ''}`;
        }
      }
    });
  }
}
