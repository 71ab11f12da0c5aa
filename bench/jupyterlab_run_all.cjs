// One "Run All Cells" of an open notebook in a real JupyterLab, in Debian's Chromium through
// playwright-core (tests/ui/node_modules): prints {"ms": time from the click to the last
// cell's execution count}. Used by bench/jupyterlab_bench.py.
//   node jupyterlab_run_all.cjs URL CELLS
const { chromium } = require('playwright-core');

const [url, cells] = process.argv.slice(2);

async function main() {
  const browser = await chromium.launch({
    executablePath: process.env.KWD_CHROMIUM || '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage']
  });
  try {
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    await page.goto(url, { timeout: 90_000 });
    await page.locator('.jp-Notebook .jp-Cell').first().waitFor({ timeout: 90_000 });
    await page.getByText('| Idle').first().waitFor({ timeout: 90_000 });
    const last = page.locator('.jp-Notebook .jp-CodeCell').last().locator('.jp-InputPrompt');
    await page.locator('.lm-MenuBar-itemLabel', { hasText: /^Run$/ }).click();
    const started = Date.now();
    await page.locator('.lm-Menu-itemLabel', { hasText: /^Run All Cells$/ }).click();
    await page.waitForFunction(
      n => (document.querySelectorAll('.jp-Notebook .jp-CodeCell .jp-InputPrompt')[n - 1]
        ?.textContent || '').includes(`[${n}]`), Number(cells), { timeout: 300_000, polling: 20 });
    process.stdout.write(JSON.stringify({ ms: Date.now() - started }) + '\n');
  } finally {
    await browser.close();
  }
}

main().catch(e => {
  console.error(e);
  process.exit(1);
});
