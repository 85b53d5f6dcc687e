/**
 * The adapter's environment, read and validated once (docs/postfix-adapter.md, "Configuration").
 * Any problem is a ConfigError naming the variable; main.ts prints every problem in one line and
 * exits with 78 (EX_CONFIG), like the janitor. An empty variable counts as unset, as in the service
 * and the janitor (packages/env-config).
 */
import {
  ConfigReader,
  type Env,
  type ListenAddress,
  type LogLevel,
  parseDuration,
  parseListenAddress,
  parseLogLevel,
  serviceUrlParser,
} from "@mail-account/env-config";

export {
  ConfigError,
  formatListenAddress,
  type ListenAddress,
  type LogLevel,
} from "@mail-account/env-config";

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

/** A listener's address, or `off`: that listener is not opened. */
function parseListener(text: string): ListenAddress | null {
  if (text.trim().toLowerCase() === "off") return null;
  return parseListenAddress(text, "127.0.0.1:10001, [::1]:10001 or off");
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

/** Every variable is checked; when any is wrong, one ConfigError reports them all. */
export function loadConfig(env: Env): Config {
  const read = new ConfigReader(env);
  const config: Config = {
    serviceUrl: read.required("SERVICE_URL", serviceUrlParser("SERVICE_TOKEN")),
    serviceToken: read.required("SERVICE_TOKEN", parseToken),
    socketmapListen: read.optional("SOCKETMAP_LISTEN_ADDR", "127.0.0.1:10001", parseListener),
    saslListen: read.optional("SASL_LISTEN_ADDR", "127.0.0.1:10002", parseListener),
    policyListen: read.optional("POLICY_LISTEN_ADDR", "127.0.0.1:10003", parseListener),
    metricsListen: read.optional("METRICS_LISTEN_ADDR", "127.0.0.1:10005", parseListener),
    redisUrl: read.optionalOrNull("REDIS_URL", parseRedisUrl),
    serviceTimeoutMs: read.optional("SERVICE_TIMEOUT", "2s", (text) => parseDuration(text, "2s, 500ms, 1m")),
    logLevel: read.optional("LOG_LEVEL", "info", parseLogLevel),
  };
  read.done();
  return config;
}

/** The Redis URL without its password, for logs. */
export function safeRedisUrl(url: string): string {
  const parsed = new URL(url);
  if (parsed.password !== "") parsed.password = "redacted";
  return parsed.href;
}
