import { existsSync, mkdirSync } from "node:fs";
import AxeBuilder from "@axe-core/playwright";
import { type Browser, type BrowserContext, chromium, type Page } from "playwright-core";

/** Debian's Chromium (installed by .ci/run); no browser is ever downloaded. */
export const chromiumPath = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";

/** Why the browser tests cannot run here, or null when they can. */
export function browserUnavailable(): string | null {
  return existsSync(chromiumPath)
    ? null
    : `${chromiumPath} is missing: install Debian's chromium (apt-get install chromium; .ci/run does)`;
}

/** `extraArgs`: more Chromium switches (the passkeys test maps a host name to 127.0.0.1). */
export async function launchBrowser(extraArgs: string[] = []): Promise<Browser> {
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
      ...extraArgs,
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

/**
 * How far the page scrolls sideways (0 when it fits the window), and the innermost elements that
 * reach past the window's right edge (outside scrolling boxes such as .table-wrap), to name them.
 */
export async function sidewaysOverflow(page: Page): Promise<{ overflow: number; culprits: string[] }> {
  return page.evaluate(`(() => {
    const width = window.innerWidth;
    const scrolls = (el) => el !== document.documentElement && el !== document.body && /auto|scroll|hidden/.test(getComputedStyle(el).overflowX);
    const inScrollBox = (el) => { for (let up = el.parentElement; up; up = up.parentElement) if (scrolls(up)) return true; return false; };
    const overflows = (el) => el.getBoundingClientRect().right > width + 0.5 || (el.scrollWidth > el.clientWidth + 1 && !scrolls(el));
    const wide = [...document.body.querySelectorAll("*")].filter((el) => overflows(el) && !inScrollBox(el));
    const innermost = wide.filter((el) => !wide.some((other) => other !== el && el.contains(other)));
    const name = (el) => el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") + (el.className && typeof el.className === "string" ? "." + el.className.trim().split(/\\s+/).join(".") : "");
    return {
      overflow: document.documentElement.scrollWidth - width,
      culprits: innermost.slice(0, 5).map((el) => name(el) + ' "' + (el.textContent || "").trim().slice(0, 40) + '"'),
    };
  })()`);
}

/** A browser context of its own (its own cookies, so its own session) and its one page. */
export interface ContextPage {
  context: BrowserContext;
  page: Page;
}

/** A fresh context with one page: the visitor's language (Accept-Language) and the window's width, 900 px high. */
export async function newContextPage(
  browser: Browser,
  { locale = "en-GB", width = 1280 }: { locale?: string; width?: number } = {},
): Promise<ContextPage> {
  const context = await browser.newContext({ locale, viewport: { width, height: 900 } });
  return { context, page: await context.newPage() };
}

/** Fills the sign-in form the page shows (on /login or the start page) and presses "Sign in". */
export async function submitSignIn(page: Page, email: string, password: string): Promise<void> {
  await fillByLabel(page, "E-mail address", email);
  await fillByLabel(page, "Password", password);
  await page.getByRole("button", { name: "Sign in", exact: true }).click();
}

/**
 * Where a sign-in should lead: the account page, the second-factor page, or "none" when the
 * caller looks for itself (a refusal stays on /login, a forced password change goes elsewhere).
 */
export type SignInLeadsTo = "account" | "2fa" | "none";

/** Signs in on /login with the address (or local part) and password, then waits where it should lead. */
export async function signInOnPage(
  page: Page,
  baseUrl: string,
  email: string,
  password: string,
  { expect = "account" }: { expect?: SignInLeadsTo } = {},
): Promise<void> {
  await page.goto(`${baseUrl}/login`);
  await submitSignIn(page, email, password);
  if (expect !== "none") await page.waitForURL(`${baseUrl}/${expect}`);
}

/** Enters a code on the second-factor page and presses "Verify" (the caller checks the outcome). */
export async function submitSecondFactor(page: Page, code: string): Promise<void> {
  await fillByLabel(page, "Verification code", code);
  await page.getByRole("button", { name: "Verify" }).click();
}

/** Presses "Sign out" and waits for the sign-in page. */
export async function signOutOnPage(page: Page): Promise<void> {
  await page.getByRole("button", { name: "Sign out" }).click();
  await page.waitForURL(/\/login/);
}
