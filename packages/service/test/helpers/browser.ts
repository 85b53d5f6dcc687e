import { existsSync, mkdirSync } from "node:fs";
import AxeBuilder from "@axe-core/playwright";
import { type Browser, chromium, type Page } from "playwright-core";

/** Debian's Chromium (installed by .ci/run); no browser is ever downloaded. */
export const chromiumPath = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";

/** Why the browser tests cannot run here, or null when they can. */
export function browserUnavailable(): string | null {
  return existsSync(chromiumPath)
    ? null
    : `${chromiumPath} is missing: install Debian's chromium (apt-get install chromium; .ci/run does)`;
}

export async function launchBrowser(): Promise<Browser> {
  return chromium.launch({
    executablePath: chromiumPath,
    headless: true,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-quic",
      "--no-first-run",
      "--disable-component-update",
      "--disable-sync",
      "--disable-dev-shm-usage",
    ],
  });
}

/** axe-core on the current page: the serious and critical violations (none expected). */
export async function seriousViolations(page: Page): Promise<string[]> {
  const results = await new AxeBuilder({ page }).analyze();
  return results.violations
    .filter((v) => v.impact === "serious" || v.impact === "critical")
    .map((v) => `${v.id} (${v.impact}): ${v.help} at ${v.nodes.map((n) => n.target.join(" ")).join(", ")}`);
}

/** Fills a form field by its visible label (what a person sees), then returns the page. */
export async function fillByLabel(page: Page, label: string | RegExp, value: string): Promise<void> {
  await page.getByLabel(label, { exact: typeof label === "string" }).fill(value);
}

/** Screenshots for docs/screenshots/ when SCREENSHOTS=1 (scripts/screenshots.ts sets it). */
export async function screenshot(page: Page, name: string): Promise<void> {
  const dir = process.env.SCREENSHOT_DIR;
  if (!dir) return;
  mkdirSync(dir, { recursive: true });
  await page.screenshot({ path: `${dir}/${name}.png`, fullPage: true });
}
