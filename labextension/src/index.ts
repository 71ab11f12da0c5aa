// kernel-watchdog's JupyterLab 4 / Notebook 7 extension: the cause of a kernel's death in a
// notification the moment it dies, its memory in the status bar (Notebook 7: the top bar)
// while it runs, and where it is when a cell runs long ("Where is it stuck?"). Everything it shows comes from the kernel-watchdog program through the
// package's server extension; it decides nothing itself.
import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { ICommandPalette } from '@jupyterlab/apputils';
import { INotebookTracker } from '@jupyterlab/notebook';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { IStatusBar } from '@jupyterlab/statusbar';

import { DeathWatcher } from './deaths';
import { MemoryItem } from './memory';
import { COMMAND, StuckWatcher } from './stuck';

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

const STUCK_PLUGIN = 'kernel-watchdog:stuck';

const stuck: JupyterFrontEndPlugin<void> = {
  id: STUCK_PLUGIN,
  description: 'Where is it stuck? The stacks of a kernel whose cell runs long',
  autoStart: true,
  requires: [INotebookTracker],
  optional: [ISettingRegistry, ICommandPalette],
  activate: (
    app: JupyterFrontEnd,
    notebooks: INotebookTracker,
    settings: ISettingRegistry | null,
    palette: ICommandPalette | null
  ) => {
    const watcher = new StuckWatcher(app, notebooks);
    app.commands.addCommand(COMMAND, {
      label: 'Where is the kernel stuck?',
      caption: "Every thread's stack of the current notebook's kernel (kernel-watchdog stacks)",
      isEnabled: () => !!notebooks.currentWidget?.sessionContext.session?.kernel,
      execute: () => watcher.showStacks()
    });
    palette?.addItem({ command: COMMAND, category: 'Kernel' });
    if (settings) {
      void settings.load(STUCK_PLUGIN).then(loaded => {
        const apply = (): void => {
          watcher.stuckAfterSeconds = loaded.get('stuckAfterSeconds').composite as number;
        };
        apply();
        loaded.changed.connect(apply);
      }, e => console.warn('kernel-watchdog: settings', e));
    }
    watcher.start();
  }
};

export default [deaths, memory, stuck];
