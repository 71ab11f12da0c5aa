// The status item of the current notebook's kernel: its whole process tree's memory, its GPU
// memory, the tightest limit and, when memory grows toward it, the time left. Read from the
// server extension once a second while the page is visible; the kernel gets no message.
import { Dialog, showDialog } from '@jupyterlab/apputils';
import { INotebookTracker } from '@jupyterlab/notebook';
import { Widget } from '@lumino/widgets';

import * as api from './api';

const REFRESH_MS = 1000;
// Time left at the current rate under which the item warns, and the share of a limit.
const WARN_SECONDS = 60;
const WARN_SHARE = 0.9;

export function memoryWords(s: api.IKernelStatus): { text: string; warning: boolean; title: string } {
  if (!s.watched) {
    return { text: 'Kernel not watched', warning: false, title: s.how_to_watch || '' };
  }
  const parts: string[] = [];
  const rss = s.rss_bytes;
  const tightest = s.limits?.tightest || null;
  const limit = tightest ? s.limits!.all.find(l => l.name === tightest.name) : undefined;
  const left = s.limits?.time_to_limit_s ?? null;
  const share = limit && limit.bytes > 0 ? limit.used / limit.bytes : 0;
  const warning = !!limit && ((left !== null && left < WARN_SECONDS) || share >= WARN_SHARE);
  let text = rss !== undefined ? `Kernel ${api.formatBytes(rss)}` : 'Kernel …';
  if (s.gpu_bytes !== undefined) {
    text += ` · GPU ${api.formatBytes(s.gpu_bytes)}`;
  }
  if (limit && !warning) {
    text += ` / ${api.formatBytes(limit.bytes)} ${api.limitInWords(limit.name)}`;
  } else if (limit) {
    const what = `${api.formatBytes(limit.bytes)} ${api.limitInWords(limit.name)}`;
    text = `⚠ ${text} · ` + (left !== null
      ? `${what} full in ~${Math.max(0, Math.round(left))} s`
      : `${Math.round(share * 100)}% of the ${what} used`);
  }
  parts.push(`Watched by kernel-watchdog (${s.watched_by || '?'})`);
  if (limit) {
    parts.push(`${api.formatBytes(limit.used)} of ${api.formatBytes(limit.bytes)} ${api.limitInWords(limit.name)} used`);
  }
  if (s.rss_change_60s_bytes !== undefined) {
    const d = s.rss_change_60s_bytes;
    parts.push(`${d >= 0 ? '+' : '-'}${api.formatBytes(Math.abs(d))} in the last minute`);
  }
  if (limit && left !== null) {
    parts.push(`at this rate the ${api.limitInWords(limit.name)} is reached in ${Math.round(left)} s`);
  }
  return { text, warning, title: parts.join('; ') };
}

export class MemoryItem extends Widget {
  private kernelId: string | null = null;
  private howToWatch = '';
  private watchedKernels = new Set<string>();

  constructor(private notebooks: INotebookTracker) {
    super();
    this.addClass('kwd-memory');
    this.id = 'kernel-watchdog-memory';
    this.node.addEventListener('click', () => {
      if (this.hasClass('kwd-unwatched')) {
        void showDialog({
          title: 'This kernel is not watched',
          body: this.howToWatch,
          buttons: [Dialog.okButton()]
        });
      }
    });
    window.setInterval(() => void this.refresh(), REFRESH_MS);
  }

  private async refresh(): Promise<void> {
    if (document.visibilityState !== 'visible') {
      return;
    }
    const kernel = this.notebooks.currentWidget?.sessionContext.session?.kernel;
    this.kernelId = kernel ? kernel.id : null;
    if (!this.kernelId) {
      this.show_('', false, false, '');
      return;
    }
    const asked = this.kernelId;
    let status: api.IKernelStatus;
    try {
      status = await api.kernelStatus(asked);
    } catch {
      return; // a kernel the server no longer has: the next one is asked next time
    }
    if (asked !== this.kernelId) {
      return;
    }
    if (status.watched) {
      this.watchedKernels.add(asked);
    } else if (this.watchedKernels.has(asked)) {
      // Watched a moment ago: restarting after a death, its new watchdog not yet started.
      this.show_('Kernel …', false, false, 'The kernel is starting again');
      return;
    }
    const words = memoryWords(status);
    this.howToWatch = status.how_to_watch || '';
    this.show_(words.text, words.warning, !status.watched, words.title);
  }

  private show_(text: string, warning: boolean, unwatched: boolean, title: string): void {
    this.node.textContent = text;
    this.node.title = title;
    this.toggleClass('kwd-warning', warning);
    this.toggleClass('kwd-unwatched', unwatched);
  }
}
