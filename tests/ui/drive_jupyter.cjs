// Drives a real JupyterLab / Notebook 7 in Debian's Chromium through playwright-core (no
// browser download: executablePath). One scenario per run; prints one JSON object of what it
// saw (texts, times) for tests/ui/test_jupyterlab_ui.py to judge, and saves screenshots.
//   node drive_jupyter.cjs SCENARIO URL OUT_DIR
// SCENARIO: crash-lab | grow-lab | crash-notebook7 | grow-notebook7 | missed-lab | stuck-lab
// stuck-lab: runs a cell that never ends, waits for the "has run for over" notification,
// clicks "Where is it stuck?" and reads the stacks it opens.
// missed-lab: opens JupyterLab, leaves it (prints "LEFT"), waits for a line on stdin (the
// test has crashed a kernel meanwhile), opens it again and waits for the notification.
const { chromium } = require('playwright-core');
const path = require('path');

const [scenario, url, outDir] = process.argv.slice(2);
const notebook7 = scenario.endsWith('notebook7');
const TIMEOUT = 90_000;

async function runCell(page) {
  const editor = page.locator('.jp-Notebook .jp-Cell .cm-content').first();
  await editor.click();
  await page.keyboard.press('Shift+Enter');
  return Date.now();
}

async function main() {
  const browser = await chromium.launch({
    executablePath: process.env.KWD_CHROMIUM || '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage']
  });
  const seen = { scenario, warnings: [], memory_texts: [] };
  try {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    await context.grantPermissions(['clipboard-read', 'clipboard-write']);
    const page = await context.newPage();
    page.on('console', m => {
      if (m.type() === 'error') seen.console_errors = [...(seen.console_errors || []), m.text()];
    });
    if (scenario === 'missed-lab') {
      await page.goto(url, { timeout: TIMEOUT });
      await page.waitForFunction(() => window.localStorage.getItem('kernel-watchdog:last-seen-ms'),
        null, { timeout: TIMEOUT });
      await page.goto('about:blank');
      process.stdout.write('LEFT\n');
      await new Promise(resolve => process.stdin.once('data', resolve));
      process.stdin.pause();
      await page.goto(url, { timeout: TIMEOUT });
      const missed = page.locator('.Toastify__toast', { hasText: 'kernel' }).first();
      await missed.waitFor({ timeout: TIMEOUT });
      seen.toast_text = await missed.textContent();
      return;
    }
    await page.goto(url, { timeout: TIMEOUT });
    const memory = page.locator('#kernel-watchdog-memory');
    // The kernel is up and watched: the item shows its memory.
    await page.waitForFunction(
      () => /^Kernel \d/.test(document.querySelector('#kernel-watchdog-memory')?.textContent || ''),
      null, { timeout: TIMEOUT });
    seen.memory_before = await memory.textContent();
    seen.memory_title = await memory.getAttribute('title');
    seen.memory_in = await memory.evaluate(n =>
      n.closest('#jp-top-panel, #top-panel, #top-panel-wrapper') ? 'top' : n.closest('.jp-StatusBar-Widget, #jp-main-statusbar') ? 'statusbar' : 'elsewhere');
    if (scenario === 'stuck-lab') {
      seen.cell_started_ms = await runCell(page);
      const offer = page.locator('.Toastify__toast', { hasText: 'has run for over' }).first();
      await offer.waitFor({ timeout: TIMEOUT });
      seen.toast_ms = Date.now();
      seen.toast_text = await offer.textContent();
      seen.buttons = await offer.locator('button').allTextContents();
      await page.waitForTimeout(800); // the toast's slide-in, for the picture
      await page.screenshot({ path: path.join(outDir, `${scenario}-notification.png`) });
      await offer.getByRole('button', { name: 'Where is it stuck?' }).click();
      const stacks = page.locator('.kwd-stacks-text');
      await stacks.waitFor({ timeout: TIMEOUT });
      seen.stacks_text = await stacks.textContent();
      seen.stacks_area = await stacks.evaluate(n => n.closest('#jp-main-dock-panel') ? 'main' : 'elsewhere');
      seen.tab_label = await page.locator('.lm-TabBar-tab.lm-mod-current .lm-TabBar-tabLabel').last().textContent().catch(() => null);
      await page.waitForTimeout(300);
      await page.screenshot({ path: path.join(outDir, `${scenario}-stacks.png`) });
      return;
    }
    if (scenario.startsWith('grow')) {
      // Sample the item while memory grows, until the death notification.
      const started = await runCell(page);
      seen.cell_started_ms = started;
      const deadline = Date.now() + TIMEOUT;
      let shot = false;
      while (Date.now() < deadline) {
        // Text and class read together: the item may refresh between two reads.
        const { text, warning } = await memory.evaluate(n => ({
          text: n.textContent, warning: n.classList.contains('kwd-warning') }));
        seen.memory_texts.push({ t: Date.now(), text, warning });
        if (warning && !shot) {
          await page.screenshot({ path: path.join(outDir, `${scenario}-warning.png`) });
          shot = true;
        }
        if (await page.locator('.Toastify__toast').count()) break;
        await page.waitForTimeout(250);
      }
    } else {
      seen.cell_started_ms = await runCell(page);
    }
    const toast = page.locator('.Toastify__toast', { hasText: 'kernel' }).first();
    await toast.waitFor({ timeout: TIMEOUT });
    seen.toast_ms = Date.now();
    seen.toast_text = await toast.textContent();
    seen.buttons = await toast.locator('button').allTextContents();
    seen.marked_cells = await page.locator('.jp-Cell.kwd-died-here').count();
    await page.waitForTimeout(800); // the toast's slide-in, for the picture
    await page.screenshot({ path: path.join(outDir, `${scenario}-notification.png`) });
    // JupyterLab's own "appears to have died" dialog comes when the kernel manager notices the
    // death (it polls every 3 s), after ours; a user closes it first.
    seen.restart_dialog_ms = await page.locator('.jp-Dialog', { hasText: 'appears to have died' })
      .getByRole('button', { name: 'Ok' }).click({ timeout: 15_000 })
      .then(() => Date.now(), () => null);
    // The remedy's one-click step, where it has one (a button besides ours): a copy leaves
    // the notification up and puts its text on the clipboard.
    const step = seen.buttons.find(b => b.trim() && !['Open report', 'Copy summary', 'What to do'].includes(b));
    if (step) {
      seen.step_button = step;
      await toast.getByRole('button', { name: step, exact: true }).click();
      seen.step_clipboard = await page.evaluate(() => navigator.clipboard.readText()).catch(e => String(e));
    }
    // "Copy summary" leaves the notification up; "Open report" is then clicked on it.
    await toast.getByText('Copy summary').click();
    seen.clipboard = await page.evaluate(() => navigator.clipboard.readText()).catch(e => String(e));
    // JupyterLab: a tab of the main area; Notebook 7: its down panel, under the notebook.
    // Both inside the app, in an iframe that may run nothing.
    await toast.getByText('Open report').click();
    const frame = page.locator('iframe.kwd-report-frame');
    await frame.waitFor({ timeout: TIMEOUT });
    seen.frame_sandbox = await frame.getAttribute('sandbox');
    seen.browser_tabs = context.pages().length;
    seen.report_area = await frame.evaluate(n =>
      n.closest('#jp-main-dock-panel') ? 'main' : n.closest('#jp-down-stack, .jp-NotebookShell-downPanel, #jp-down-panel') ? 'down' : (n.closest('[id]') || {}).id || 'elsewhere');
    seen.frame_height = await frame.evaluate(n => n.getBoundingClientRect().height);
    seen.tab_label = await page.locator('.lm-TabBar-tab.lm-mod-current .lm-TabBar-tabLabel').last().textContent().catch(() => null);
    const body = frame.contentFrame().locator('body');
    await body.waitFor({ timeout: TIMEOUT });
    seen.report_text = (await body.textContent()).slice(0, 4000);
    await page.waitForTimeout(300);
    await page.screenshot({ path: path.join(outDir, `${scenario}-report.png`) });
  } catch (e) {
    seen.error = String(e && e.stack || e);
    try {
      const pages = browser.contexts()[0]?.pages() || [];
      if (pages[0]) await pages[0].screenshot({ path: path.join(outDir, `${scenario}-failure.png`) });
    } catch {}
  } finally {
    await browser.close();
    process.stdout.write(JSON.stringify(seen) + '\n');
  }
}

main();
