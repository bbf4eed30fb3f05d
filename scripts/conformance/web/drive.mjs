// Opens the runner page in headless Chromium (Debian's, through playwright-core) and keeps it open until
// this process's stdin closes or the page says it is done. Prints one line "browser VERSION" when up.
// playwright-core comes from $NODE_MODULES (where `npm ci` put it), else from node_modules beside this file.
import { createRequire } from 'node:module';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const modules = process.env.NODE_MODULES || join(import.meta.dirname, 'node_modules');
const { chromium } = createRequire(join(modules, 'resolve-from-here.js'))('playwright-core');

const url = process.argv[2];
const executablePath = process.env.CHROMIUM || '/usr/bin/chromium';
const profile = mkdtempSync(join(tmpdir(), 'gathermultiaxis-chromium-'));
const context = await chromium.launchPersistentContext(profile, {
  executablePath, headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
         '--disable-component-update', '--disable-sync'],
});
const page = context.pages()[0] || await context.newPage();
page.on('console', (message) => process.stderr.write(`[page ${message.type()}] ${message.text()}\n`));
page.on('pageerror', (error) => process.stderr.write(`[page error] ${error.stack || error}\n`));
const version = context.browser() ? context.browser().version() : 'unknown';
await page.goto(url);
process.stdout.write(`browser ${version}\n`);
let stopping = false;  // stdin's 'end' and 'close' both come: stop once
const stop = async () => {
  if (stopping) return;
  stopping = true;
  await context.close().catch(() => {});
  rmSync(profile, {recursive: true, force: true, maxRetries: 5, retryDelay: 200});
  process.exit(0);
};
process.stdin.on('end', stop);
process.stdin.on('close', stop);
process.stdin.resume();
await page.waitForFunction(() => document.getElementById('log').textContent.endsWith('(done)'), null, {timeout: 0})
  .catch(() => {});  // the browser closed under it: stop() is under way
await stop();
