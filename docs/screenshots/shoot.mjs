// Screenshots of the site's API reference in headless Chromium at 1366 px, and the page heights.
// Usage: node docs/screenshots/shoot.mjs <base URL of a served build/site> <output dir> [prefix]
// (python -m http.server -d build/site; Chromium: Debian's package, or CHROMIUM=/path).
import { chromium } from "playwright-core";

const [base, out, prefix = "api"] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"],
});
const page = await browser.newPage({ viewport: { width: 1366, height: 900 } });
const offsite = [];
page.on("request", (request) => {
  if (!request.url().startsWith(base) && !request.url().startsWith("data:")) offsite.push(request.url());
});
await page.goto(`${base}/api/`, { waitUntil: "networkidle" });
await page.waitForTimeout(1500);
const height = () => page.evaluate(() => document.documentElement.scrollHeight);
const report = { page: `${base}/api/`, height: await height() };
await page.evaluate(() => window.scrollTo(0, 900));  // past the page's introduction
await page.waitForTimeout(300);
await page.screenshot({ path: `${out}/${prefix}-sections.png` });
const frame = page.frames().find((f) => f.url().includes("/api/reference/"));
// The frame is as tall as its page (no inner scrollbar): click by script, scroll the outer page.
const click = (selector) => frame.evaluate((s) => document.querySelector(s).click(), selector);
const scrollTo = async (selector, above) => {
  const frameTop = (await (await frame.frameElement()).boundingBox()).y + (await page.evaluate(() => scrollY));
  const top = await frame.evaluate((s) => document.querySelector(s).getBoundingClientRect().top, selector);
  await page.evaluate((y) => window.scrollTo(0, y), frameTop + top - above);
  await page.waitForTimeout(500);
};
// One operation opened: its request example and its answers, success first.
await click("#operations-Resources-createResource .opblock-summary-control");
await page.waitForTimeout(1500);
await scrollTo("#operations-Resources-createResource", 20);
await page.screenshot({ path: `${out}/${prefix}-operation.png` });
await scrollTo("#operations-Resources-createResource .responses-wrapper", 60);
await page.screenshot({ path: `${out}/${prefix}-answers.png` });
report.heightWithOneOperationOpen = await height();
await click("#operations-Resources-createResource .opblock-summary-control");
// The security scheme, as the Authorize button shows it.
await page.evaluate(() => window.scrollTo(0, 0));  // scrolling down after: no "Back to top" button
await click(".btn.authorize");
await page.waitForTimeout(800);
await scrollTo(".dialog-ux .modal-ux", 40);
await page.screenshot({ path: `${out}/${prefix}-authorize.png` });
await click(".dialog-ux .close-modal");
await page.waitForTimeout(500);
report.heightAfter = await height();
report.offsiteRequests = offsite;
console.log(JSON.stringify(report, null, 2));
await browser.close();
