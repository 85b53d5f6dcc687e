/**
 * The janitor's environment (spec section 6, "Janitor configuration"), read and validated once.
 * Any problem is a ConfigError naming the variable; main.ts prints it as one line and exits.
 */

export type LogLevel = "debug" | "info" | "warn" | "error";

export interface ListenAddress {
  /** undefined means all interfaces (LISTEN_ADDR ":8080"). */
  host: string | undefined;
  port: number;
}

export interface Config {
  webhookSecret: string;
  /** Base URL of the account service, without a trailing slash. */
  userliUrl: string;
  userliToken: string;
  toucherSieveLocation: string;
  toucherUseSudo: boolean;
  toucherTickIntervalMs: number;
  purgerCommand: string;
  purgerCommandTimeoutMs: number;
  purgerRetentionHours: number;
  purgerTickIntervalMs: number;
  purgerDatabasePath: string;
  listen: ListenAddress;
  logLevel: LogLevel;
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

/** The default purge command: one that does nothing (and succeeds). */
export const DEFAULT_PURGER_COMMAND = "true";

const UNIT_MS: Record<string, number> = { h: 3_600_000, m: 60_000, s: 1000, ms: 1 };

/**
 * Parses durations such as `24h`, `90m`, `1h30m`, `45s`, `1.5h`, `500ms` into milliseconds.
 * Units: h, m, s, ms, combinable in any order; numbers may have a decimal fraction.
 * Throws (a plain Error) on anything else, on zero and on durations too large to be exact.
 */
export function parseDuration(text: string): number {
  const input = text.trim();
  if (input === "") throw new Error("empty duration");
  const part = /(\d+(?:\.\d+)?)(ms|h|m|s)/y;
  let total = 0;
  let position = 0;
  while (position < input.length) {
    part.lastIndex = position;
    const match = part.exec(input);
    if (!match) throw new Error(`invalid duration "${text}" (use e.g. 24h, 90m, 1h30m, 45s)`);
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

/** LISTEN_ADDR: `:8080` (all interfaces), `host:port`, `[v6addr]:port`. Port 0 picks a free port. */
export function parseListenAddress(text: string): ListenAddress {
  const match = /^(?:\[([0-9A-Fa-f:.%\w-]+)\]|([^[\]:\s]*)):(\d{1,5})$/.exec(text.trim());
  if (!match) throw new Error(`invalid listen address "${text}" (use :8080, 127.0.0.1:8080 or [::1]:8080)`);
  const port = Number(match[3]);
  if (port > 65535) throw new Error(`invalid port in listen address "${text}"`);
  const host = match[1] ?? match[2] ?? "";
  return { host: host === "" ? undefined : host, port };
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

type Env = Record<string, string | undefined>;

/** Reads one variable: undefined when unset; a set-but-empty value is an error (never a silent default). */
function raw(env: Env, name: string): string | undefined {
  const value = env[name];
  if (value === undefined) return undefined;
  if (value.trim() === "") throw new ConfigError(name, "is set but empty");
  return value;
}

function required(env: Env, name: string): string {
  const value = raw(env, name);
  if (value === undefined) throw new ConfigError(name, "is required but not set");
  return value;
}

function convert<T>(name: string, value: string, parse: (text: string) => T): T {
  try {
    return parse(value);
  } catch (error) {
    throw new ConfigError(name, error instanceof Error ? error.message : String(error));
  }
}

function optional<T>(env: Env, name: string, fallback: string, parse: (text: string) => T): T {
  return convert(name, raw(env, name) ?? fallback, parse);
}

function parseServiceUrl(text: string): string {
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
    throw new Error("URL must not contain credentials (the token goes into USERLI_TOKEN)");
  }
  if (url.search !== "" || url.hash !== "") throw new Error("URL must not contain a query or fragment");
  return url.href.replace(/\/+$/, "");
}

function parseRetentionHours(text: string): number {
  const trimmed = text.trim();
  if (!/^\d+(?:\.\d+)?$/.test(trimmed)) throw new Error(`invalid number of hours "${text}"`);
  const hours = Number(trimmed);
  if (!Number.isFinite(hours) || hours * 3_600_000 > Number.MAX_SAFE_INTEGER) {
    throw new Error(`number of hours "${text}" is too large`);
  }
  return hours;
}

function parseLogLevel(text: string): LogLevel {
  const level = text.trim().toLowerCase();
  if (!(LOG_LEVELS as readonly string[]).includes(level)) {
    throw new Error(`invalid log level "${text}" (use ${LOG_LEVELS.join(", ")})`);
  }
  return level as LogLevel;
}

function nonBlank(text: string): string {
  return text;
}

/**
 * Reads and validates the whole configuration. Every variable is checked; when any is missing or
 * invalid, one ConfigError reports them all, in the order of the documentation.
 */
export function loadConfig(env: Env): Config {
  const problems: ConfigError[] = [];
  // Runs one variable's check; a problem is collected and a stand-in returned, so that the checks
  // after it still run. The stand-in is never used: any problem throws below.
  const check = <T>(read: () => T): T => {
    try {
      return read();
    } catch (error) {
      if (!(error instanceof ConfigError)) throw error;
      problems.push(error);
      return undefined as T;
    }
  };
  const config: Config = {
    webhookSecret: check(() => required(env, "WEBHOOK_SECRET")),
    userliUrl: check(() => convert("USERLI_URL", required(env, "USERLI_URL"), parseServiceUrl)),
    userliToken: check(() => required(env, "USERLI_TOKEN").trim()),
    toucherSieveLocation: check(() => required(env, "TOUCHER_SIEVE_LOCATION")),
    toucherUseSudo: check(() => optional(env, "TOUCHER_USE_SUDO", "false", parseBoolean)),
    toucherTickIntervalMs: check(() => optional(env, "TOUCHER_TICK_INTERVAL", "24h", parseDuration)),
    purgerCommand: check(() => optional(env, "PURGER_COMMAND", DEFAULT_PURGER_COMMAND, nonBlank)),
    purgerCommandTimeoutMs: check(() => optional(env, "PURGER_COMMAND_TIMEOUT", "10m", parseDuration)),
    purgerRetentionHours: check(() => optional(env, "PURGER_RETENTION_HOURS", "24", parseRetentionHours)),
    purgerTickIntervalMs: check(() => optional(env, "PURGER_TICK_INTERVAL", "1h", parseDuration)),
    purgerDatabasePath: check(() => optional(env, "PURGER_DATABASE_PATH", "./mailboxes.csv", nonBlank)),
    listen: check(() => optional(env, "LISTEN_ADDR", ":8080", parseListenAddress)),
    logLevel: check(() => optional(env, "LOG_LEVEL", "info", parseLogLevel)),
  };
  if (problems.length > 0) throw ConfigError.of(problems);
  return config;
}
