/**
 * Reading a small program's configuration from its environment: the janitor's and the Postfix
 * adapter's, which must not load the account service's code but follow its rule
 * (packages/service/src/config.ts): a variable that is empty or only blanks counts as unset. So
 * `FOO=` in a systemd EnvironmentFile means the default, or "not set" for a required variable, in
 * all three programs; it never is a value of its own. Every variable is checked, and one ConfigError
 * names every problem, so that one start tells the operator everything to fix.
 */

export type Env = Record<string, string | undefined>;

export type LogLevel = "debug" | "info" | "warn" | "error";

export interface ListenAddress {
  /** undefined means all interfaces (`:8080`). */
  host: string | undefined;
  port: number;
}

export class ConfigError extends Error {
  /** The first variable at fault. */
  readonly variable: string;
  /** Every problem found, each naming its variable (one entry for a single problem). */
  readonly problems: readonly ConfigError[];

  constructor(variable: string, message: string, problems?: readonly ConfigError[]) {
    super(`${variable}: ${message}`);
    this.name = "ConfigError";
    this.variable = variable;
    this.problems = problems ?? [this];
  }

  /** One error for several problems: the operator fixes them all in one go, not one per start. */
  static of(problems: readonly ConfigError[]): ConfigError {
    const [first] = problems;
    if (first === undefined) throw new Error("no configuration problem to report");
    if (problems.length === 1) return first;
    const error = new ConfigError(first.variable, "", problems);
    error.message = problems.map((problem) => problem.message).join("; ");
    return error;
  }
}

/**
 * Reads variables one at a time, in the order of the documentation. A problem is collected and a
 * stand-in returned, so that the variables after it are still checked; `done()` then throws them
 * all, so the stand-in is never used.
 */
export class ConfigReader {
  readonly #env: Env;
  readonly #problems: ConfigError[] = [];

  constructor(env: Env) {
    this.#env = env;
  }

  /** A variable that must be set (and not empty), as it stands or parsed. */
  required(name: string): string;
  required<T>(name: string, parse: (text: string) => T): T;
  required<T>(name: string, parse?: (text: string) => T): T | string {
    const value = this.#value(name);
    if (value === undefined) return this.#problem(name, "is required but not set");
    return parse ? this.#parse(name, value, parse) : value;
  }

  /** A variable with a default, written as the operator would write it (and parsed alike). */
  optional(name: string, fallback: string): string;
  optional<T>(name: string, fallback: string, parse: (text: string) => T): T;
  optional<T>(name: string, fallback: string, parse?: (text: string) => T): T | string {
    const value = this.#value(name) ?? fallback;
    return parse ? this.#parse(name, value, parse) : value;
  }

  /** A variable whose absence means "none" (null). */
  optionalOrNull<T>(name: string, parse: (text: string) => T): T | null {
    const value = this.#value(name);
    return value === undefined ? null : this.#parse(name, value, parse);
  }

  /** Throws every problem found so far as one ConfigError. */
  done(): void {
    if (this.#problems.length > 0) throw ConfigError.of(this.#problems);
  }

  /** undefined when unset, empty or only blanks: the service's rule. */
  #value(name: string): string | undefined {
    const value = this.#env[name];
    return value === undefined || value.trim() === "" ? undefined : value;
  }

  #parse<T>(name: string, value: string, parse: (text: string) => T): T {
    try {
      return parse(value);
    } catch (error) {
      return this.#problem(name, error instanceof Error ? error.message : String(error));
    }
  }

  #problem<T>(name: string, message: string): T {
    this.#problems.push(new ConfigError(name, message));
    return undefined as T;
  }
}

const UNIT_MS: Record<string, number> = { h: 3_600_000, m: 60_000, s: 1000, ms: 1 };

/**
 * Parses durations such as `24h`, `90m`, `1h30m`, `45s`, `1.5h`, `500ms` into milliseconds.
 * Units: h, m, s, ms, combinable in any order; numbers may have a decimal fraction.
 * Throws (a plain Error) on anything else, on zero and on durations too large to be exact;
 * `examples` are what the message suggests instead.
 */
export function parseDuration(text: string, examples = "24h, 90m, 1h30m, 45s"): number {
  const input = text.trim();
  if (input === "") throw new Error("empty duration");
  const part = /(\d+(?:\.\d+)?)(ms|h|m|s)/y;
  let total = 0;
  let position = 0;
  while (position < input.length) {
    part.lastIndex = position;
    const match = part.exec(input);
    if (!match) throw new Error(`invalid duration "${text}" (use e.g. ${examples})`);
    total += Number(match[1]) * (UNIT_MS[match[2] as string] as number);
    position = part.lastIndex;
  }
  total = Math.round(total);
  if (total <= 0) throw new Error(`duration must be greater than zero, got "${text}"`);
  if (!Number.isSafeInteger(total)) throw new Error(`duration "${text}" is too large`);
  return total;
}

/** Formats milliseconds back into the h/m/s notation (for logs). */
export function formatDuration(ms: number): string {
  let rest = ms;
  let out = "";
  for (const [unit, size] of [
    ["h", 3_600_000],
    ["m", 60_000],
    ["s", 1000],
  ] as const) {
    const count = Math.floor(rest / size);
    if (count > 0) out += `${count}${unit}`;
    rest -= count * size;
  }
  if (rest > 0 || out === "") out += `${rest}ms`;
  return out;
}

/**
 * A listen address: `:8080` (all interfaces), `host:port`, `[v6addr]:port`. Port 0 lets the kernel
 * pick a free port (the tests use it; the "listening" log line names the port). `examples` are what
 * the message suggests instead.
 */
export function parseListenAddress(
  text: string,
  examples = ":8080, 127.0.0.1:8080 or [::1]:8080",
): ListenAddress {
  const match = /^(?:\[([0-9A-Fa-f:.%\w-]+)\]|([^[\]:\s]*)):(\d{1,5})$/.exec(text.trim());
  if (!match) throw new Error(`invalid listen address "${text}" (use ${examples})`);
  const port = Number(match[3]);
  if (port > 65535) throw new Error(`invalid port in listen address "${text}"`);
  const host = match[1] ?? match[2] ?? "";
  return { host: host === "" ? undefined : host, port };
}

/** `host:port` for logs and the metrics page. */
export function formatListenAddress(address: { host: string | undefined; port: number }): string {
  const host = address.host ?? "";
  return host.includes(":") ? `[${host}]:${address.port}` : `${host}:${address.port}`;
}

export function parseBoolean(text: string): boolean {
  switch (text.trim().toLowerCase()) {
    case "true":
    case "1":
      return true;
    case "false":
    case "0":
      return false;
    default:
      throw new Error(`invalid boolean "${text}" (use true, false, 1 or 0)`);
  }
}

const LOG_LEVELS: readonly LogLevel[] = ["debug", "info", "warn", "error"];

export function parseLogLevel(text: string): LogLevel {
  const level = text.trim().toLowerCase();
  if (!(LOG_LEVELS as readonly string[]).includes(level)) {
    throw new Error(`invalid log level "${text}" (use ${LOG_LEVELS.join(", ")})`);
  }
  return level as LogLevel;
}

/**
 * The account service's base URL, without a trailing slash (a path prefix is kept). Credentials in
 * it are refused: the token has its own variable, named in the message.
 */
export function serviceUrlParser(tokenVariable: string): (text: string) => string {
  return (text) => {
    let url: URL;
    try {
      url = new URL(text.trim());
    } catch {
      throw new Error(`invalid URL "${text}"`);
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") {
      throw new Error(`URL must start with http:// or https://, got "${text}"`);
    }
    if (url.username !== "" || url.password !== "") {
      throw new Error(`URL must not contain credentials (the token goes into ${tokenVariable})`);
    }
    if (url.search !== "" || url.hash !== "") throw new Error("URL must not contain a query or fragment");
    return url.href.replace(/\/+$/, "");
  };
}
