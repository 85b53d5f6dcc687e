/**
 * The janitor's environment (spec section 6, "Janitor configuration"), read and validated once.
 * Any problem is a ConfigError naming the variable; main.ts prints it as one line and exits.
 * An empty variable counts as unset, as in the service (packages/env-config).
 */
import {
  ConfigReader,
  type Env,
  type ListenAddress,
  type LogLevel,
  parseBoolean,
  parseDuration,
  parseListenAddress,
  parseLogLevel,
  serviceUrlParser,
} from "@mail-account/env-config";

export { ConfigError, formatDuration, type ListenAddress, type LogLevel } from "@mail-account/env-config";

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
  /** LISTEN_ADDR; a host of undefined means all interfaces (":8080"). */
  listen: ListenAddress;
  logLevel: LogLevel;
}

/** The default purge command: one that does nothing (and succeeds). */
export const DEFAULT_PURGER_COMMAND = "true";

function parseRetentionHours(text: string): number {
  const trimmed = text.trim();
  if (!/^\d+(?:\.\d+)?$/.test(trimmed)) throw new Error(`invalid number of hours "${text}"`);
  const hours = Number(trimmed);
  if (!Number.isFinite(hours) || hours * 3_600_000 > Number.MAX_SAFE_INTEGER) {
    throw new Error(`number of hours "${text}" is too large`);
  }
  return hours;
}

/**
 * Reads and validates the whole configuration. Every variable is checked; when any is missing or
 * invalid, one ConfigError reports them all, in the order of the documentation.
 */
export function loadConfig(env: Env): Config {
  const read = new ConfigReader(env);
  const config: Config = {
    webhookSecret: read.required("WEBHOOK_SECRET"),
    userliUrl: read.required("USERLI_URL", serviceUrlParser("USERLI_TOKEN")),
    userliToken: read.required("USERLI_TOKEN", (text) => text.trim()),
    toucherSieveLocation: read.required("TOUCHER_SIEVE_LOCATION"),
    toucherUseSudo: read.optional("TOUCHER_USE_SUDO", "false", parseBoolean),
    toucherTickIntervalMs: read.optional("TOUCHER_TICK_INTERVAL", "24h", parseDuration),
    purgerCommand: read.optional("PURGER_COMMAND", DEFAULT_PURGER_COMMAND),
    purgerCommandTimeoutMs: read.optional("PURGER_COMMAND_TIMEOUT", "10m", parseDuration),
    purgerRetentionHours: read.optional("PURGER_RETENTION_HOURS", "24", parseRetentionHours),
    purgerTickIntervalMs: read.optional("PURGER_TICK_INTERVAL", "1h", parseDuration),
    purgerDatabasePath: read.optional("PURGER_DATABASE_PATH", "./mailboxes.csv"),
    listen: read.optional("LISTEN_ADDR", ":8080", parseListenAddress),
    logLevel: read.optional("LOG_LEVEL", "info", parseLogLevel),
  };
  read.done();
  return config;
}
