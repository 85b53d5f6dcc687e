/**
 * Retention list -> Sieve check -> touch. Users who only forward their mail never sign in; when
 * their Sieve script forwards everything, the janitor reports them as active so that the service's
 * inactivity clean-up does not remove them.
 */
import { execFile } from "node:child_process";
import { readFile, stat } from "node:fs/promises";
import type { Logger } from "pino";
import { addressPlaceholders, parseAddress, renderPath } from "./shell.ts";
import { decide } from "./sieve.ts";

export interface ToucherOptions {
  /** Base URL of the account service, without a trailing slash. */
  baseUrl: string;
  token: string;
  sieveLocation: string;
  useSudo: boolean;
  logger: Logger;
  /** Per HTTP request; 10 s unless told otherwise. */
  requestTimeoutMs?: number;
}

export interface ToucherResult {
  users: number;
  forwarding: number;
  touched: number;
  failed: number;
}

const MAX_SCRIPT_BYTES = 1024 * 1024;

export class HttpError extends Error {
  readonly status: number;

  constructor(message: string, status: number) {
    super(message);
    this.name = "HttpError";
    this.status = status;
  }
}

/**
 * Reads a Sieve script; null when there is none. With sudo: `sudo -n cat <path>` without a shell
 * (`-n`: fail instead of asking for a password).
 */
export async function readSieveScript(
  path: string,
  useSudo: boolean,
  signal?: AbortSignal,
): Promise<string | null> {
  if (!useSudo) {
    try {
      const info = await stat(path);
      if (info.size > MAX_SCRIPT_BYTES)
        throw new Error(`Sieve script is larger than ${MAX_SCRIPT_BYTES} bytes`);
      return await readFile(path, { encoding: "utf8", signal });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return null;
      throw error;
    }
  }
  return new Promise((resolve, reject) => {
    execFile(
      "sudo",
      ["-n", "cat", path],
      { encoding: "utf8", maxBuffer: MAX_SCRIPT_BYTES, timeout: 10_000, signal },
      (error, stdout, stderr) => {
        if (!error) {
          resolve(stdout);
        } else if (/No such file or directory/.test(stderr)) {
          resolve(null);
        } else {
          const detail = stderr.trim() || error.message;
          reject(new Error(`sudo -n cat ${path} failed: ${detail.slice(0, 500)}`));
        }
      },
    );
  });
}

export class Toucher {
  readonly #options: ToucherOptions;
  readonly #log: Logger;

  constructor(options: ToucherOptions) {
    this.#options = options;
    this.#log = options.logger.child({ component: "toucher" });
  }

  #requestSignal(signal?: AbortSignal): AbortSignal {
    const timeout = AbortSignal.timeout(this.#options.requestTimeoutMs ?? 10_000);
    return signal ? AbortSignal.any([timeout, signal]) : timeout;
  }

  /** GET /api/retention/users: the addresses of users without a sign-in for about two years. */
  async fetchInactiveUsers(signal?: AbortSignal): Promise<unknown[]> {
    const response = await fetch(`${this.#options.baseUrl}/api/retention/users`, {
      headers: { Authorization: `Bearer ${this.#options.token}`, Accept: "application/json" },
      signal: this.#requestSignal(signal),
    });
    const body = await response.text();
    if (!response.ok) {
      throw new HttpError(
        `GET /api/retention/users answered ${response.status}: ${body.slice(0, 300)}`,
        response.status,
      );
    }
    let list: unknown;
    try {
      list = JSON.parse(body);
    } catch {
      throw new Error(`GET /api/retention/users did not answer JSON: ${body.slice(0, 300)}`);
    }
    if (!Array.isArray(list)) throw new Error("GET /api/retention/users did not answer a JSON array");
    return list.map((item: unknown) =>
      typeof item === "object" && item !== null && "email" in item
        ? (item as { email: unknown }).email
        : item,
    );
  }

  /** PUT /api/retention/{email}/touch with an empty JSON object: "active now". */
  async touch(email: string, signal?: AbortSignal): Promise<void> {
    const path = encodeURIComponent(email).replaceAll("%40", "@");
    const response = await fetch(`${this.#options.baseUrl}/api/retention/${path}/touch`, {
      method: "PUT",
      headers: {
        Authorization: `Bearer ${this.#options.token}`,
        "Content-Type": "application/json",
        Accept: "application/json",
      },
      body: "{}",
      signal: this.#requestSignal(signal),
    });
    const body = await response.text();
    if (!response.ok) {
      throw new HttpError(`PUT touch answered ${response.status}: ${body.slice(0, 300)}`, response.status);
    }
  }

  /** One toucher tick. A failure for one user is logged and the next user handled. */
  async tick(signal?: AbortSignal): Promise<ToucherResult> {
    const result: ToucherResult = { users: 0, forwarding: 0, touched: 0, failed: 0 };
    let users: unknown[];
    try {
      users = await this.fetchInactiveUsers(signal);
    } catch (error) {
      if (signal?.aborted) return result;
      this.#log.error({ err: describeError(error) }, "could not fetch the retention list");
      result.failed += 1;
      return result;
    }
    result.users = users.length;
    for (const user of users) {
      if (signal?.aborted) break;
      const check = parseAddress(user);
      if (!check.ok) {
        this.#log.warn(
          { email: user, reason: check.reason },
          "skipping a retention list entry that is not a plain address",
        );
        result.failed += 1;
        continue;
      }
      const { address } = check;
      const log = this.#log.child({ email: address.email });
      const path = renderPath(this.#options.sieveLocation, addressPlaceholders(address));
      try {
        const script = await readSieveScript(path, this.#options.useSudo, signal);
        if (script === null) {
          log.debug({ path }, "no Sieve script");
          continue;
        }
        const decision = decide(script);
        if (decision.reason.startsWith("parse error"))
          log.warn({ path, reason: decision.reason }, "Sieve script does not parse");
        if (!decision.forwardsAll) {
          log.debug({ path, reason: decision.reason }, "Sieve script does not forward all mail");
          continue;
        }
        result.forwarding += 1;
        await this.touch(address.email, signal);
        result.touched += 1;
        log.info({ path, reason: decision.reason }, "touched forwarding-only user");
      } catch (error) {
        if (signal?.aborted) break;
        result.failed += 1;
        log.warn({ path, err: describeError(error) }, "could not check or touch user");
      }
    }
    this.#log.info(result, "toucher tick done");
    return result;
  }
}

function describeError(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = error.cause instanceof Error ? `: ${error.cause.message}` : "";
  return `${error.message}${cause}`;
}
