/**
 * The adapter's environment, read and validated once (docs/postfix-adapter.md, "Configuration").
 * Any problem is a ConfigError naming the variable; main.ts prints every problem in one line and
 * exits with 78 (EX_CONFIG), like the janitor.
 */

export type LogLevel = "debug" | "info" | "warn" | "error";

export interface ListenAddress {
  /** undefined means all interfaces (":10001"). */
  host: string | undefined;
  port: number;
}

export interface Config {
  /** Base URL of the account service, without a trailing slash (a path prefix is kept). */
  serviceUrl: string;
  serviceToken: string;
  /** null: the listener is switched off (`off`). */
  socketmapListen: ListenAddress | null;
  saslListen: ListenAddress | null;
  policyListen: ListenAddress | null;
  metricsListen: ListenAddress | null;
  /** null: quota counters in memory (one adapter); otherwise shared in this Redis. */
  redisUrl: string | null;
  /** Limit for one request to the service (and for one Redis command). */
  serviceTimeoutMs: number;
  logLevel: LogLevel;
}

export class ConfigError extends Error {
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

const UNIT_MS: Record<string, number> = { h: 3_600_000, m: 60_000, s: 1000, ms: 1 };

/** `2s`, `500ms`, `1m30s`, `1.5s` into milliseconds; zero and garbage are refused. */
export function parseDuration(text: string): number {
  const input = text.trim();
  if (input === "") throw new Error("empty duration");
  const part = /(\d+(?:\.\d+)?)(ms|h|m|s)/y;
  let total = 0;
  let position = 0;
  while (position < input.length) {
    part.lastIndex = position;
    const match = part.exec(input);
    if (!match) throw new Error(`invalid duration "${text}" (use e.g. 2s, 500ms, 1m)`);
    total += Number(match[1]) * (UNIT_MS[match[2] as string] as number);
    position = part.lastIndex;
  }
  total = Math.round(total);
  if (total <= 0) throw new Error(`duration must be greater than zero, got "${text}"`);
  if (!Number.isSafeInteger(total)) throw new Error(`duration "${text}" is too large`);
  return total;
}

/**
 * A listener's address: `off`, `host:port`, `[v6addr]:port` or `:port` (all interfaces). Port 0
 * lets the kernel pick a free port (the tests use it; the "listening" log line names the port).
 */
export function parseListenAddress(text: string): ListenAddress | null {
  if (text.trim().toLowerCase() === "off") return null;
  const match = /^(?:\[([0-9A-Fa-f:.%\w-]+)\]|([^[\]:\s]*)):(\d{1,5})$/.exec(text.trim());
  if (!match) throw new Error(`invalid listen address "${text}" (use 127.0.0.1:10001, [::1]:10001 or off)`);
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
    throw new Error("URL must not contain credentials (the token goes into SERVICE_TOKEN)");
  }
  if (url.search !== "" || url.hash !== "") throw new Error("URL must not contain a query or fragment");
  return url.href.replace(/\/+$/, "");
}

function parseRedisUrl(text: string): string {
  let url: URL;
  try {
    url = new URL(text.trim());
  } catch {
    throw new Error("invalid URL (use redis://host:6379 or rediss://host:6380/0)");
  }
  if (url.protocol !== "redis:" && url.protocol !== "rediss:") {
    throw new Error("URL must start with redis:// or rediss://");
  }
  if (url.pathname !== "" && url.pathname !== "/" && !/^\/\d{1,2}$/.test(url.pathname)) {
    throw new Error("the path of the URL is the database number (redis://host:6379/0)");
  }
  return text.trim();
}

/** The token goes into a header line: printable ASCII without spaces (the service's are 64 hex digits). */
function parseToken(text: string): string {
  const token = text.trim();
  if (!/^[\x21-\x7e]+$/.test(token)) throw new Error("must be printable ASCII without spaces");
  return token;
}

const LOG_LEVELS: readonly LogLevel[] = ["debug", "info", "warn", "error"];

function parseLogLevel(text: string): LogLevel {
  const level = text.trim().toLowerCase();
  if (!(LOG_LEVELS as readonly string[]).includes(level)) {
    throw new Error(`invalid log level "${text}" (use ${LOG_LEVELS.join(", ")})`);
  }
  return level as LogLevel;
}

type Env = Record<string, string | undefined>;

/** undefined when unset; a set-but-empty value is an error (never a silent default). */
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

/** Every variable is checked; when any is wrong, one ConfigError reports them all. */
export function loadConfig(env: Env): Config {
  const problems: ConfigError[] = [];
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
    serviceUrl: check(() => convert("SERVICE_URL", required(env, "SERVICE_URL"), parseServiceUrl)),
    serviceToken: check(() => convert("SERVICE_TOKEN", required(env, "SERVICE_TOKEN"), parseToken)),
    socketmapListen: check(() =>
      optional(env, "SOCKETMAP_LISTEN_ADDR", "127.0.0.1:10001", parseListenAddress),
    ),
    saslListen: check(() => optional(env, "SASL_LISTEN_ADDR", "127.0.0.1:10002", parseListenAddress)),
    policyListen: check(() => optional(env, "POLICY_LISTEN_ADDR", "127.0.0.1:10003", parseListenAddress)),
    metricsListen: check(() => optional(env, "METRICS_LISTEN_ADDR", "127.0.0.1:10005", parseListenAddress)),
    redisUrl: check(() => {
      const value = raw(env, "REDIS_URL");
      return value === undefined ? null : convert("REDIS_URL", value, parseRedisUrl);
    }),
    serviceTimeoutMs: check(() => optional(env, "SERVICE_TIMEOUT", "2s", parseDuration)),
    logLevel: check(() => optional(env, "LOG_LEVEL", "info", parseLogLevel)),
  };
  if (problems.length > 0) throw ConfigError.of(problems);
  return config;
}

/** The Redis URL without its password, for logs. */
export function safeRedisUrl(url: string): string {
  const parsed = new URL(url);
  if (parsed.password !== "") parsed.password = "redacted";
  return parsed.href;
}
