// kernel-watchdog's JupyterLab 4 / Notebook 7 extension: the cause of a kernel's death in a
// notification the moment it dies, and its memory in the status bar (Notebook 7: the top bar)
// while it runs. Everything it shows comes from the kernel-watchdog program through the
// package's server extension; it decides nothing itself.
import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { INotebookTracker } from '@jupyterlab/notebook';
import { IStatusBar } from '@jupyterlab/statusbar';

import { DeathWatcher } from './deaths';
import { MemoryItem } from './memory';

const deaths: JupyterFrontEndPlugin<void> = {
  id: 'kernel-watchdog:deaths',
  description: 'Says why a kernel died, the moment it dies',
  autoStart: true,
  optional: [INotebookTracker],
  activate: (app: JupyterFrontEnd, notebooks: INotebookTracker | null) => {
    new DeathWatcher(app, notebooks).start();
  }
};

const memory: JupyterFrontEndPlugin<void> = {
  id: 'kernel-watchdog:memory',
  description: "The current notebook kernel's memory and the limit it grows toward",
  autoStart: true,
  requires: [INotebookTracker],
  optional: [IStatusBar],
  activate: (app: JupyterFrontEnd, notebooks: INotebookTracker, statusBar: IStatusBar | null) => {
    const item = new MemoryItem(notebooks);
    if (statusBar) {
      statusBar.registerStatusItem('kernel-watchdog:memory', {
        item,
        align: 'left',
        rank: 100
      });
    } else {
      // Notebook 7 has no status bar: its top bar.
      app.shell.add(item, 'top', { rank: 1000 });
    }
  }
};

export default [deaths, memory];
