/**
 * Test support: start the real daemon (bin/mailbox-janitor) as a child process in a temporary
 * directory, sign and post webhooks, poll with a deadline. Not a test file itself.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { createHmac } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

export const repoRoot = resolve(import.meta.dirname, "../../..");
export const janitorBin = join(repoRoot, "bin", "mailbox-janitor");
export const SECRET = "test-webhook-secret-0123456789";
export const TOKEN = "test-retention-token-abcdef";

export function sign(body: string | Buffer, secret = SECRET): string {
  return createHmac("sha256", secret).update(body).digest("hex");
}

export async function tempDir(prefix = "janitor-test-"): Promise<string> {
  return mkdtemp(join(tmpdir(), prefix));
}

export function sleep(ms: number): Promise<void> {
  return new Promise((done) => setTimeout(done, ms));
}

/** Polls until `check` returns something truthy; fails after the deadline with `what`. */
export async function waitFor<T>(
  what: string,
  check: () => T | Promise<T>,
  timeoutMs = 10_000,
): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value) return value as NonNullable<T>;
    } catch (error) {
      lastError = error;
    }
    if (Date.now() > deadline) {
      throw new Error(
        `timed out waiting for ${what}${lastError ? ` (last error: ${String(lastError)})` : ""}`,
      );
    }
    await sleep(50);
  }
}

/** True when the process is gone or a zombie (dead, waiting to be reaped by init). */
export function processGone(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return true;
  }
  const stat = readText(`/proc/${pid}/stat`);
  return stat === "" || / Z /.test(stat.slice(stat.lastIndexOf(")")));
}

export function readText(path: string): string {
  return existsSync(path) ? readFileSync(path, "utf8") : "";
}

/** The non-empty lines of a file ([] when missing). */
export function readLines(path: string): string[] {
  return readText(path)
    .split("\n")
    .filter((line) => line !== "");
}

/** pino's level numbers. */
const levelNames: Record<number, string> = {
  10: "trace",
  20: "debug",
  30: "info",
  40: "warn",
  50: "error",
  60: "fatal",
};

export interface LogLine {
  level: string;
  msg: string;
  [key: string]: unknown;
}

export interface Janitor {
  process: ChildProcess;
  url: string;
  dir: string;
  csv: string;
  logs: LogLine[];
  /** Raw stdout and stderr so far. */
  output: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  waitForLog: (what: string, match: (line: LogLine) => boolean, timeoutMs?: number) => Promise<LogLine>;
  stop: (signal?: NodeJS.Signals) => Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

const running = new Set<ChildProcess>();

export interface StartOptions {
  env?: Record<string, string>;
  /** Temporary directory to run in (created when not given); the CSV file lives there. */
  dir?: string;
}

/** Starts bin/mailbox-janitor on a free port (LISTEN_ADDR 127.0.0.1:0) and waits until it listens. */
export async function startJanitor(options: StartOptions = {}): Promise<Janitor> {
  const dir = options.dir ?? (await tempDir());
  const csv = join(dir, "mailboxes.csv");
  const env: Record<string, string> = {
    PATH: process.env["PATH"] ?? "/usr/bin:/bin",
    WEBHOOK_SECRET: SECRET,
    USERLI_URL: "http://127.0.0.1:9",
    USERLI_TOKEN: TOKEN,
    TOUCHER_SIEVE_LOCATION: join(dir, "sieve", "{domain}", "{local_part}.sieve"),
    TOUCHER_TICK_INTERVAL: "24h",
    PURGER_DATABASE_PATH: csv,
    LISTEN_ADDR: "127.0.0.1:0",
    LOG_LEVEL: "debug",
    ...options.env,
  };
  const child = spawn(janitorBin, [], { cwd: dir, env, stdio: ["ignore", "pipe", "pipe"] });
  running.add(child);
  const logs: LogLine[] = [];
  let output = "";
  let pending = "";
  child.stdout.setEncoding("utf8");
  child.stderr.setEncoding("utf8");
  child.stdout.on("data", (chunk: string) => {
    output += chunk;
    pending += chunk;
    const lines = pending.split("\n");
    pending = lines.pop() ?? "";
    for (const line of lines) {
      try {
        const entry = JSON.parse(line) as LogLine & { level: string | number };
        // The janitor logs pino's numeric levels (like the service); the tests read them by name.
        if (typeof entry.level === "number") entry.level = levelNames[entry.level] ?? String(entry.level);
        logs.push(entry as LogLine);
      } catch {
        logs.push({ level: "unparsed", msg: line });
      }
    }
  });
  child.stderr.on("data", (chunk: string) => {
    output += chunk;
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((done) => {
    child.on("exit", (code, signal) => {
      running.delete(child);
      done({ code, signal });
    });
  });

  const waitForLog = (what: string, match: (line: LogLine) => boolean, timeoutMs = 10_000) =>
    waitFor(what, () => logs.find(match), timeoutMs);

  const listening = await Promise.race([
    waitForLog("the janitor to listen", (line) => line.msg === "listening", 20_000),
    exited.then(({ code }) => {
      throw new Error(`janitor exited with ${code} before listening:\n${output}`);
    }),
  ]);
  const url = `http://127.0.0.1:${listening["port"] as number}`;

  const stop = async (signal: NodeJS.Signals = "SIGTERM") => {
    if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    return exited;
  };
  return { process: child, url, dir, csv, logs, output: () => output, exited, waitForLog, stop };
}

/** Kills every daemon still running (for `after` hooks), then removes the given directories. */
export async function cleanup(...dirs: string[]): Promise<void> {
  await Promise.all(
    [...running].map(
      (child) =>
        new Promise<void>((done) => {
          if (child.exitCode !== null || child.signalCode !== null) {
            done();
            return;
          }
          const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
          child.once("exit", () => {
            clearTimeout(timer);
            done();
          });
          child.kill("SIGTERM");
        }),
    ),
  );
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
}

process.on("exit", () => {
  for (const child of running) child.kill("SIGKILL");
});

export interface WebhookOptions {
  /** Signing secret; null sends no signature header at all. */
  secret?: string | null;
  /** Overrides the computed signature header. */
  signature?: string;
  id?: string;
}

export interface HttpAnswer {
  status: number;
  body: string;
  headers: Headers;
}

let deliveries = 0;

/** POSTs a webhook (object bodies are JSON-encoded) to the daemon's /service. */
export async function postWebhook(
  url: string,
  payload: unknown,
  options: WebhookOptions = {},
): Promise<HttpAnswer> {
  const body = typeof payload === "string" ? payload : JSON.stringify(payload);
  deliveries += 1;
  const headers: Record<string, string> = {
    "Content-Type": "application/json",
    "X-Webhook-Id": options.id ?? `test-delivery-${process.pid}-${deliveries}`,
    "X-Webhook-Attempt": "1",
  };
  const secret = options.secret === undefined ? SECRET : options.secret;
  if (options.signature !== undefined) headers["X-Webhook-Signature"] = options.signature;
  else if (secret !== null) headers["X-Webhook-Signature"] = sign(body, secret);
  const response = await fetch(`${url}/service`, { method: "POST", headers, body });
  return { status: response.status, body: await response.text(), headers: response.headers };
}

/** A webhook timestamp `offsetMs` from `from` (now), as the service writes it: 2025-09-10T11:36:14+00:00. */
export function atom(offsetMs = 0, from = Date.now()): string {
  return new Date(from + offsetMs).toISOString().replace(/\.\d{3}Z$/, "+00:00");
}

export function event(
  type: string,
  email: string,
  timestamp: string | undefined = new Date().toISOString(),
): unknown {
  return { type, ...(timestamp === undefined ? {} : { timestamp }), data: { email } };
}

/** Parses the CSV file: header check plus [email, timestamp] pairs of the data lines. */
export function csvEntries(path: string): { header: string | undefined; rows: string[][] } {
  const [header, ...rows] = readLines(path);
  return { header, rows: rows.map((row) => row.split(",")) };
}
