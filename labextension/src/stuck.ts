// "Where is it stuck?": a cell that has run longer than the setting's seconds gets a
// notification that offers its kernel's stacks (`kernel-watchdog stacks`, through the server
// extension); the command palette offers them for the current notebook any time. The stacks
// open in a tab (Notebook 7: its down panel), as the crash report does.
import { JupyterFrontEnd } from '@jupyterlab/application';
import { MainAreaWidget, Notification } from '@jupyterlab/apputils';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { Widget } from '@lumino/widgets';

import * as api from './api';

export const COMMAND = 'kernel-watchdog:where-is-it-stuck';

function notebookName(panel: NotebookPanel): string {
  return panel.context.path.split('/').pop() || panel.context.path;
}

class StacksView extends Widget {
  constructor(text: string) {
    super();
    const pre = document.createElement('pre');
    pre.className = 'kwd-stacks-text';
    pre.textContent = text;
    this.node.appendChild(pre);
    this.addClass('kwd-stacks');
  }
}

export class StuckWatcher {
  // Seconds a cell runs before the offer; 0: never offered.
  stuckAfterSeconds = 60;
  private timers = new Map<NotebookPanel, number>();

  constructor(
    private app: JupyterFrontEnd,
    private notebooks: INotebookTracker
  ) {}

  start(): void {
    this.notebooks.widgetAdded.connect((_, panel) => this.follow(panel));
    this.notebooks.forEach(panel => this.follow(panel));
  }

  // The stacks of the notebook's kernel, in a view of their own.
  async showStacks(panel: NotebookPanel | null = this.notebooks.currentWidget): Promise<void> {
    const kernelId = panel?.sessionContext.session?.kernel?.id;
    if (!panel || !kernelId) {
      Notification.warning('No running kernel to look at');
      return;
    }
    let text: string;
    try {
      text = (await api.stacks(kernelId)).text;
    } catch (e) {
      Notification.error(`kernel-watchdog stacks failed: ${(e as Error).message}`);
      return;
    }
    const notebook7 = this.app.name === 'Jupyter Notebook';
    const widget = new MainAreaWidget({ content: new StacksView(text) });
    widget.id = `kernel-watchdog-stacks-${kernelId}-${Date.now()}`;
    widget.title.label = `Where ${notebookName(panel)} is`;
    widget.title.closable = true;
    this.app.shell.add(widget, notebook7 ? 'down' : 'main');
    this.app.shell.activateById(widget.id);
  }

  private follow(panel: NotebookPanel): void {
    const context = panel.sessionContext;
    context.statusChanged.connect((_, status) => {
      if (status === 'busy') {
        this.arm(panel);
      } else {
        this.disarm(panel);
      }
    });
    panel.disposed.connect(() => this.disarm(panel));
  }

  // A busy kernel: the offer comes if it is still busy after the setting's seconds. Busy
  // stretches end at 'idle' (or a restart, a death), which take the offer back.
  private arm(panel: NotebookPanel): void {
    if (this.timers.has(panel) || this.stuckAfterSeconds <= 0) {
      return;
    }
    const seconds = this.stuckAfterSeconds;
    this.timers.set(
      panel,
      window.setTimeout(() => {
        this.timers.delete(panel);
        if (panel.sessionContext.kernelDisplayStatus !== 'busy') {
          return;
        }
        const id = Notification.info(
          `${notebookName(panel)}: a cell has run for over ${seconds} s`,
          {
            autoClose: false,
            actions: [
              {
                label: 'Where is it stuck?',
                caption: "Every thread's stack of the kernel, native and Python",
                callback: () => void this.showStacks(panel)
              }
            ]
          }
        );
        // The cell ended: the offer goes with it.
        const ended = (_: unknown, status: string): void => {
          if (status !== 'busy') {
            Notification.dismiss(id);
            panel.sessionContext.statusChanged.disconnect(ended);
          }
        };
        panel.sessionContext.statusChanged.connect(ended);
      }, seconds * 1000)
    );
  }

  private disarm(panel: NotebookPanel): void {
    const timer = this.timers.get(panel);
    if (timer !== undefined) {
      window.clearTimeout(timer);
      this.timers.delete(panel);
    }
  }
}
