/**
 * Due entries -> purge command. Each tick re-reads the file; every entry older than the retention
 * gets PURGER_COMMAND run through /bin/sh with its placeholders quoted. Success removes the entry,
 * failure (non-zero exit, signal, timeout) keeps it for the next tick and logs the output.
 */
import { spawn } from "node:child_process";
import type { Logger } from "pino";
import { entriesOf, malformedOf, type PendingEntry, type PendingStore } from "./pending.ts";
import { type Address, addressPlaceholders, parsePurgeAddress, renderCommand } from "./shell.ts";

export interface CommandResult {
  ok: boolean;
  exitCode: number | null;
  signal: string | null;
  timedOut: boolean;
  /** Set when the command could not be started at all. */
  error: string | null;
  stdout: string;
  stderr: string;
  durationMs: number;
}

export interface RunOptions {
  timeoutMs: number;
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /** Aborting it ends the command early (as on a timeout): used when shutdown cannot wait longer. */
  signal?: AbortSignal;
}

const OUTPUT_LIMIT = 8192;
const KILL_GRACE_MS = 5000;

class Capture {
  text = "";
  truncated = false;

  add(chunk: Buffer): void {
    if (this.text.length >= OUTPUT_LIMIT) {
      this.truncated = true;
      return;
    }
    this.text += chunk.toString("utf8");
    if (this.text.length > OUTPUT_LIMIT) {
      this.text = this.text.slice(0, OUTPUT_LIMIT);
      this.truncated = true;
    }
  }

  toString(): string {
    return this.truncated ? `${this.text}... [truncated]` : this.text;
  }
}

/**
 * Runs `/bin/sh -c command` in its own process group. On timeout (or abort) the whole group gets
 * SIGTERM, then SIGKILL after a grace period. Never rejects.
 */
export function runShellCommand(command: string, options: RunOptions): Promise<CommandResult> {
  const started = Date.now();
  return new Promise((resolve) => {
    const stdout = new Capture();
    const stderr = new Capture();
    let timedOut = false;
    let exitCode: number | null = null;
    let exitSignal: string | null = null;
    let startError: string | null = null;
    let killTimer: NodeJS.Timeout | undefined;
    let drainTimer: NodeJS.Timeout | undefined;

    const child = spawn("/bin/sh", ["-c", command], {
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
      env: options.env ?? process.env,
      cwd: options.cwd,
    });
    const killGroup = (signal: NodeJS.Signals) => {
      if (child.pid === undefined) return;
      try {
        process.kill(-child.pid, signal);
      } catch {
        // the group is already gone
      }
    };
    const stop = () => {
      if (timedOut || exitCode !== null || exitSignal !== null) return;
      timedOut = true;
      killGroup("SIGTERM");
      killTimer = setTimeout(() => killGroup("SIGKILL"), KILL_GRACE_MS);
    };
    const timer = setTimeout(stop, options.timeoutMs);
    options.signal?.addEventListener("abort", stop, { once: true });

    child.stdout.on("data", (chunk: Buffer) => stdout.add(chunk));
    child.stderr.on("data", (chunk: Buffer) => stderr.add(chunk));
    child.on("error", (error) => {
      startError = error.message;
    });
    child.on("exit", (code, signal) => {
      exitCode = code;
      exitSignal = signal;
      // Background processes of the command may hold the pipes open; do not wait for them forever.
      drainTimer = setTimeout(() => {
        child.stdout.destroy();
        child.stderr.destroy();
      }, 2000);
    });
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      clearTimeout(killTimer);
      clearTimeout(drainTimer);
      options.signal?.removeEventListener("abort", stop);
      exitCode ??= code;
      exitSignal ??= signal;
      resolve({
        ok: exitCode === 0 && !timedOut && startError === null,
        exitCode,
        signal: exitSignal,
        timedOut,
        error: startError,
        stdout: stdout.toString(),
        stderr: stderr.toString(),
        durationMs: Date.now() - started,
      });
    });
  });
}

export interface PurgerOptions {
  command: string;
  timeoutMs: number;
  retentionHours: number;
  store: PendingStore;
  logger: Logger;
  /** Environment of the command (main.ts passes its own without the secret and the token). */
  env?: NodeJS.ProcessEnv;
}

export interface TickResult {
  due: number;
  purged: number;
  failed: number;
}

export class Purger {
  readonly #options: PurgerOptions;
  readonly #log: Logger;
  /** Per address (lower-case): the purge currently running, so that one mailbox is never purged twice at once. */
  readonly #running = new Map<string, Promise<boolean>>();
  readonly #kill = new AbortController();
  #stopped = false;

  constructor(options: PurgerOptions) {
    this.#options = options;
    this.#log = options.logger.child({ component: "purger" });
  }

  get retentionMs(): number {
    return this.#options.retentionHours * 3_600_000;
  }

  /** When an entry recorded now must carry this timestamp to be due at once. */
  dueNowTimestamp(now = new Date()): Date {
    return new Date(now.getTime() - this.retentionMs);
  }

  /** One purge tick: re-read the file, purge every due entry in turn. */
  async tick(signal?: AbortSignal): Promise<TickResult> {
    const file = await this.#options.store.read();
    for (const bad of malformedOf(file)) {
      this.#log.warn(
        { line: bad.line, content: bad.raw, reason: bad.reason },
        "malformed line in pending deletions file, kept as is",
      );
    }
    const now = Date.now();
    const due = new Map<string, PendingEntry>();
    for (const entry of entriesOf(file)) {
      if (entry.timestamp.getTime() + this.retentionMs > now) continue;
      if (!due.has(entry.key)) due.set(entry.key, entry);
    }
    const result: TickResult = { due: due.size, purged: 0, failed: 0 };
    for (const entry of due.values()) {
      if (signal?.aborted || this.#stopped) break;
      if (this.#running.has(entry.key)) continue;
      const check = parsePurgeAddress(entry.email);
      if (!check.ok) continue; // never an entry: pending.ts reads such a line as malformed (logged above)
      if (await this.purge(check.address, "retention expired")) result.purged += 1;
      else result.failed += 1;
    }
    if (result.due > 0) this.#log.info(result, "purge tick done");
    else this.#log.debug({ entries: entriesOf(file).length }, "purge tick: nothing due");
    return result;
  }

  /**
   * Runs the purge command for one mailbox (waiting first for a purge of the same mailbox that is
   * already running). Success removes the address from the file; failure leaves the file alone.
   */
  purge(address: Address, reason: string): Promise<boolean> {
    const previous = this.#running.get(address.key) ?? Promise.resolve(true);
    const current = previous.then(() => this.#purgeOnce(address, reason));
    this.#running.set(address.key, current);
    void current.finally(() => {
      if (this.#running.get(address.key) === current) this.#running.delete(address.key);
    });
    return current;
  }

  async #purgeOnce(address: Address, reason: string): Promise<boolean> {
    if (this.#stopped) return false;
    const log = this.#log.child({ email: address.email });
    // The last gate before the command: whatever path the address came by, no wildcard reaches it.
    const check = parsePurgeAddress(address.email);
    if (!check.ok) {
      log.warn({ reason: check.reason }, "address refused, purge command not run");
      return false;
    }
    const command = renderCommand(this.#options.command, addressPlaceholders(check.address));
    log.info({ reason }, "purging mailbox");
    const result = await runShellCommand(command, {
      timeoutMs: this.#options.timeoutMs,
      env: this.#options.env,
      signal: this.#kill.signal,
    });
    const details = {
      exitCode: result.exitCode,
      signal: result.signal,
      timedOut: result.timedOut,
      durationMs: result.durationMs,
      stdout: result.stdout,
      stderr: result.stderr,
      ...(result.error === null ? {} : { error: result.error }),
    };
    if (!result.ok) {
      log.warn(details, "purge command failed, entry kept for the next tick");
      return false;
    }
    try {
      const removed = await this.#options.store.remove(address.email);
      log.info({ ...details, removedLines: removed }, "mailbox purged");
      return true;
    } catch (error) {
      log.error({ err: error }, "mailbox purged, but removing its entry failed; it will be purged again");
      return false;
    }
  }

  /** Resolves when no purge is running. */
  async idle(): Promise<void> {
    while (this.#running.size > 0) await Promise.allSettled([...this.#running.values()]);
  }

  /** No new purges from now on; running ones finish (and their bookkeeping is done). */
  stop(): void {
    this.#stopped = true;
  }

  /** Ends running commands early (counted as failures: their entries stay in the file). */
  killRunning(): void {
    this.#kill.abort();
  }
}
