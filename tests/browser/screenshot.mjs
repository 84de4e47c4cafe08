// Opens console pages in a real browser (Debian's Chromium, driven by playwright-core) and
// takes a screenshot of each, failing on any script error of a page. Used by the tests that
// set up what a page shows (tests/it/console.rs `screenshots`). The last line printed is a JSON
// list of the files written.
import { createRequire } from "node:module";
import path from "node:path";

const env = JSON.parse(process.env.SCREENSHOT_TEST);
const require = createRequire(import.meta.url);
const { chromium } = require(env.playwright);

const browser = await chromium.launch({ executablePath: env.chromium, args: ["--no-sandbox"] });
const shots = [];
try {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  const problems = [];
  page.on("pageerror", (e) => problems.push(e.message));
  page.on("console", (m) => { if (m.type() === "error") problems.push(m.text()); });
  for (const [route, name] of env.pages) {
    const response = await page.goto(env.url + route);
    if (!response || response.status() !== 200) {
      throw new Error(`${route}: status ${response && response.status()}`);
    }
    await page.locator("main").waitFor();
    const file = path.join(env.screenshots, name + ".png");
    await page.screenshot({ path: file, fullPage: true });
    shots.push(file);
  }
  if (problems.length > 0) {
    throw new Error("script errors: " + problems.join("; "));
  }
  await context.close();
} finally {
  await browser.close();
}
console.log(JSON.stringify(shots));
