import { createHmac, createSecretKey, type KeyObject, randomBytes } from "node:crypto";
import { chmodSync, linkSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { inspect } from "node:util";

/** Everything the service reads from its environment, validated once at start. */
export interface Config {
  listen: { host: string; port: number };
  databaseUrl: string;
  databasePoolSize: number;
  /** PostgreSQL: hot reads as named prepared statements (off behind poolers that lack them). */
  databasePreparedStatements: boolean;
  logLevel: LogLevel;
  metricsToken: string | null;
  cryptoPoolSize: number;
  jobsEnabled: boolean;
  /** Seconds between webhook attempts after each failure; then the delivery is marked failed. */
  webhookRetryDelays: number[];
  /** The integration API also under userli's path prefixes (/api/dovecot, /api/postfix, ...). */
  userliCompat: boolean;
  /** Fastify's `trustProxy`: false, true, or a comma-separated list of proxy addresses/CIDRs. */
  trustProxy: boolean | string;
  /** Seconds a client may take to send a whole request (headers and body); 0 = no limit. */
  requestTimeout: number;
  /** Seconds a connection may stay silent while a request is read or answered; 0 = no limit. */
  connectionTimeout: number;
  /** The web pages for people (sign-in, self-service, registration, recovery, admin area). */
  webEnabled: boolean;
  /** k-anonymity range API of leaked passwords checked for new passwords; null = no check. */
  pwnedPasswordsUrl: string | null;
  /** SMTP relay of outgoing e-mail (smtp:// or smtps://); null = no e-mail is sent. */
  smtpUrl: string | null;
  /** Where the installation secret comes from (readInstallationSecret reads or creates it). */
  installationSecret: InstallationSecretSource;
}

/** INSTALLATION_SECRET's value, or the file holding it (created on first start when missing). */
export type InstallationSecretSource =
  | { from: "value"; secret: InstallationSecret }
  | { from: "file"; path: string; variable: "INSTALLATION_SECRET_FILE" | null };

export type LogLevel = "fatal" | "error" | "warn" | "info" | "debug" | "trace" | "silent";
const logLevels: readonly LogLevel[] = ["fatal", "error", "warn", "info", "debug", "trace", "silent"];

/** A configuration problem: its message is one line naming the variable. */
export class ConfigError extends Error {}

/**
 * The default database, `var/data.sqlite` in the repository root: resolved from this file's location,
 * not the working directory, so `npm start` and `bin/console` run from anywhere use the same file.
 * An explicit relative `DATABASE_URL` path stays relative to the working directory.
 */
const defaultDatabaseFile = fileURLToPath(new URL("../../../var/data.sqlite", import.meta.url));
export const defaultDatabaseUrl = `sqlite:${defaultDatabaseFile}`;

/** Every variable the service reads (the README's configuration table lists the same). */
export const configVariables = [
  "LISTEN_ADDR",
  "DATABASE_URL",
  "DATABASE_POOL_SIZE",
  "DATABASE_PREPARED_STATEMENTS",
  "LOG_LEVEL",
  "METRICS_TOKEN",
  "CRYPTO_POOL_SIZE",
  "JOBS_ENABLED",
  "WEBHOOK_RETRY_DELAYS",
  "USERLI_COMPAT",
  "TRUST_PROXY",
  "REQUEST_TIMEOUT",
  "CONNECTION_TIMEOUT",
  "WEB_ENABLED",
  "PWNED_PASSWORDS_URL",
  "SMTP_URL",
  "INSTALLATION_SECRET",
  "INSTALLATION_SECRET_FILE",
] as const;

/**
 * What `--help` says about each variable: the value that gives the default (empty where the default
 * is no value at all) and its meaning. Typed by `configVariables`, so a variable cannot be added
 * there without being described here; a test checks these defaults against `loadConfig({})`.
 */
export const configVariableHelp: Record<
  (typeof configVariables)[number],
  { default: string; meaning: string }
> = {
  LISTEN_ADDR: { default: "127.0.0.1:8000", meaning: "HTTP address, host:port or [v6]:port (:port = all)" },
  DATABASE_URL: {
    default: defaultDatabaseUrl,
    meaning: "sqlite:<path>, postgres://user:pass@host/db or mysql://user:pass@host/db",
  },
  DATABASE_POOL_SIZE: { default: "10", meaning: "connections to PostgreSQL or MariaDB" },
  DATABASE_PREPARED_STATEMENTS: {
    default: "true",
    meaning: "PostgreSQL: hot reads as named prepared statements (false behind poolers)",
  },
  LOG_LEVEL: { default: "info", meaning: logLevels.join(", ") },
  METRICS_TOKEN: { default: "", meaning: "bearer token of /metrics (unset: no /metrics route)" },
  CRYPTO_POOL_SIZE: {
    default: String(availableParallelism()),
    meaning: "threads hashing passwords and sealing keys (default: the number of CPUs)",
  },
  JOBS_ENABLED: { default: "true", meaning: "run the daily jobs on this instance" },
  WEBHOOK_RETRY_DELAYS: {
    default: "10,60,180",
    meaning: "seconds between webhook attempts after failures, or none",
  },
  USERLI_COMPAT: {
    default: "false",
    meaning: "also answer under userli's /api/dovecot, /api/postfix, /api/roundcube, /api/keycloak",
  },
  TRUST_PROXY: {
    default: "false",
    meaning:
      "behind a reverse proxy: true, or its addresses (comma-separated IPs/CIDRs); client IP and TLS from X-Forwarded-*",
  },
  REQUEST_TIMEOUT: {
    default: "60",
    meaning: "seconds a client may take to send a whole request; slower ones are cut (0: no limit)",
  },
  CONNECTION_TIMEOUT: {
    default: "120",
    meaning: "seconds a connection may stay silent during a request before it is cut (0: no limit)",
  },
  WEB_ENABLED: { default: "true", meaning: "serve the web pages for people (false: APIs only)" },
  PWNED_PASSWORDS_URL: {
    default: "",
    meaning:
      "range API of leaked passwords new passwords are checked against, e.g. https://api.pwnedpasswords.com/range",
  },
  SMTP_URL: {
    default: "",
    meaning: "SMTP relay for e-mail to users, e.g. smtp://127.0.0.1:25 (unset: no e-mail)",
  },
  INSTALLATION_SECRET: {
    default: "",
    meaning: "this installation's secret key, 64 hex digits or base64 of 32+ bytes (unset: from the file)",
  },
  INSTALLATION_SECRET_FILE: {
    default: "",
    meaning:
      "file holding it, created (mode 0600) when missing; default: installation-secret beside the SQLite database, else var/installation-secret",
  },
};

/**
 * Reads the environment. A variable that is unset, empty or only blanks counts as unset and gets its
 * default, for every variable alike (so `VAR=` in an env file never means something of its own).
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const read = (name: (typeof configVariables)[number]): string | undefined => {
    const value = env[name];
    return value === undefined || value.trim() === "" ? undefined : value;
  };
  return {
    listen: parseListenAddr(read("LISTEN_ADDR") ?? "127.0.0.1:8000"),
    databaseUrl: parseDatabaseUrl(read("DATABASE_URL") ?? defaultDatabaseUrl),
    databasePoolSize: parsePositiveInt("DATABASE_POOL_SIZE", read("DATABASE_POOL_SIZE"), 10),
    databasePreparedStatements: parseBoolean(
      "DATABASE_PREPARED_STATEMENTS",
      read("DATABASE_PREPARED_STATEMENTS"),
      true,
    ),
    logLevel: parseLogLevel(read("LOG_LEVEL") ?? "info"),
    metricsToken: read("METRICS_TOKEN") ?? null,
    cryptoPoolSize: parsePositiveInt("CRYPTO_POOL_SIZE", read("CRYPTO_POOL_SIZE"), availableParallelism()),
    jobsEnabled: parseBoolean("JOBS_ENABLED", read("JOBS_ENABLED"), true),
    webhookRetryDelays: parseDelays("WEBHOOK_RETRY_DELAYS", read("WEBHOOK_RETRY_DELAYS") ?? "10,60,180"),
    userliCompat: parseBoolean("USERLI_COMPAT", read("USERLI_COMPAT"), false),
    trustProxy: parseTrustProxy(read("TRUST_PROXY")),
    requestTimeout: parseSeconds("REQUEST_TIMEOUT", read("REQUEST_TIMEOUT"), 60),
    connectionTimeout: parseSeconds("CONNECTION_TIMEOUT", read("CONNECTION_TIMEOUT"), 120),
    webEnabled: parseBoolean("WEB_ENABLED", read("WEB_ENABLED"), true),
    pwnedPasswordsUrl: parseHttpUrl("PWNED_PASSWORDS_URL", read("PWNED_PASSWORDS_URL"), ["http:", "https:"]),
    smtpUrl: parseHttpUrl("SMTP_URL", read("SMTP_URL"), ["smtp:", "smtps:"]),
    installationSecret: installationSecretSource(
      read("INSTALLATION_SECRET"),
      read("INSTALLATION_SECRET_FILE"),
      read("DATABASE_URL") ?? defaultDatabaseUrl,
    ),
  };
}

export function parseListenAddr(value: string): { host: string; port: number } {
  const match = /^(?:\[([0-9a-fA-F:.]+)\]|([^:]*)):(\d{1,5})$/.exec(value.trim());
  const port = match ? Number(match[3]) : Number.NaN;
  if (!match || port > 65535) {
    throw new ConfigError(`LISTEN_ADDR: expected host:port, got "${value}"`);
  }
  const host = match[1] ?? match[2] ?? "";
  return { host: host === "" ? "0.0.0.0" : host, port };
}

function parseDatabaseUrl(value: string): string {
  if (!/^(sqlite:|postgres:\/\/|postgresql:\/\/|mysql:\/\/|mariadb:\/\/)/.test(value)) {
    throw new ConfigError(
      `DATABASE_URL: unsupported scheme in "${redactUrl(value)}" (use sqlite:, postgres:// or mysql://)`,
    );
  }
  return value;
}

function parseLogLevel(value: string): LogLevel {
  const level = value.toLowerCase() as LogLevel;
  if (!logLevels.includes(level)) {
    throw new ConfigError(`LOG_LEVEL: expected one of ${logLevels.join(", ")}, got "${value}"`);
  }
  return level;
}

function parsePositiveInt(name: string, value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!/^\d+$/.test(value) || Number(value) < 1) {
    throw new ConfigError(`${name}: expected a positive whole number, got "${value}"`);
  }
  return Number(value);
}

function parseSeconds(name: string, value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!/^\d{1,6}$/.test(value.trim()))
    throw new ConfigError(`${name}: expected whole seconds (0 for no limit), got "${value}"`);
  return Number(value.trim());
}

function parseBoolean(name: string, value: string | undefined, fallback: boolean): boolean {
  if (value === undefined) return fallback;
  if (/^(1|true|yes|on)$/i.test(value)) return true;
  if (/^(0|false|no|off)$/i.test(value)) return false;
  throw new ConfigError(`${name}: expected true or false, got "${value}"`);
}

/** Comma-separated seconds, or `none` for a single attempt without retries. */
function parseDelays(name: string, value: string): number[] {
  if (value.trim().toLowerCase() === "none") return [];
  const parts = value.split(",").map((part) => part.trim());
  if (!parts.every((part) => /^\d{1,7}$/.test(part))) {
    throw new ConfigError(
      `${name}: expected comma-separated seconds like 10,60,360 (or none), got "${value}"`,
    );
  }
  return parts.map(Number);
}

function parseTrustProxy(value: string | undefined): boolean | string {
  if (value === undefined || /^(0|false|no|off)$/i.test(value)) return false;
  if (/^(1|true|yes|on)$/i.test(value)) return true;
  const parts = value.split(",").map((part) => part.trim());
  if (!parts.every((part) => /^[0-9a-fA-F:.]+(\/\d{1,3})?$/.test(part)))
    throw new ConfigError(
      `TRUST_PROXY: expected true, false or proxy addresses like 10.0.0.1,fd00::/8, got "${value}"`,
    );
  return parts.join(",");
}

function parseHttpUrl(name: string, value: string | undefined, schemes: string[]): string | null {
  if (value === undefined) return null;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new ConfigError(`${name}: not a URL: "${redactUrl(value)}"`);
  }
  if (!schemes.includes(url.protocol))
    throw new ConfigError(`${name}: expected a ${schemes.join(" or ")} URL, got "${redactUrl(value)}"`);
  return value;
}

/** Hides the password of a connection URL so it can be printed. */
export function redactUrl(url: string): string {
  return url.replace(/(\/\/[^:/@]*:)[^@/]*@/, "$1***@");
}

/**
 * The random secret key of this installation, kept outside the database (so a stolen database alone
 * reveals nothing keyed with it): backup codes are stored as keyed hashes under it, and the set-up
 * code is derived from it. Never printed: JSON and `util.inspect` show a placeholder.
 */
export class InstallationSecret {
  static readonly minBytes = 32;
  // A KeyObject, not a Buffer: createHmac takes one as it is, where a Buffer is first checked and
  // wrapped on every call (several times the HMAC itself, which an import of many backup codes feels).
  readonly #key: KeyObject;

  constructor(key: Buffer) {
    if (key.length < InstallationSecret.minBytes)
      throw new RangeError("an installation secret has 32+ bytes");
    this.#key = createSecretKey(Buffer.from(key));
  }

  /** A fresh random secret (tools and tests that keep nothing; the service reads its own). */
  static generate(): InstallationSecret {
    return new InstallationSecret(randomBytes(InstallationSecret.minBytes));
  }

  /**
   * HMAC-SHA256 under this secret of a purpose and its parts, joined by NUL bytes (no part holds
   * one), so one purpose's input can never be taken for another's.
   */
  keyedHash(purpose: string, ...parts: string[]): Buffer {
    return createHmac("sha256", this.#key)
      .update([purpose, ...parts].join("\0"), "utf8")
      .digest();
  }

  toJSON(): string {
    return "[installation secret]";
  }

  [inspect.custom](): string {
    return "InstallationSecret [hidden]";
  }
}

/**
 * The default file: beside the SQLite database (so the console, given the same DATABASE_URL, finds
 * the same secret; for the default database that is `var/`), otherwise `var/` in the repository.
 */
function defaultInstallationSecretPath(databaseUrl: string): string {
  const sqlite = /^sqlite:(.*)$/.exec(databaseUrl);
  const file = sqlite?.[1]?.replace(/^\/\/(?=\/)/, "");
  const database = file && file !== ":memory:" ? resolve(file) : defaultDatabaseFile;
  return join(dirname(database), "installation-secret");
}

function installationSecretSource(
  value: string | undefined,
  file: string | undefined,
  databaseUrl: string,
): InstallationSecretSource {
  if (value !== undefined && file !== undefined)
    throw new ConfigError("INSTALLATION_SECRET and INSTALLATION_SECRET_FILE: set one of them, not both");
  if (value !== undefined)
    return { from: "value", secret: parseInstallationSecret("INSTALLATION_SECRET", value) };
  if (file !== undefined) return { from: "file", path: resolve(file), variable: "INSTALLATION_SECRET_FILE" };
  return { from: "file", path: defaultInstallationSecretPath(databaseUrl), variable: null };
}

/** 64+ hex digits, or base64 of 32+ bytes. The message never repeats the value. */
function parseInstallationSecret(origin: string, text: string): InstallationSecret {
  const value = text.trim();
  let key: Buffer | null = null;
  if (/^(?:[0-9a-fA-F]{2})+$/.test(value)) key = Buffer.from(value, "hex");
  else if (/^[A-Za-z0-9+/_-]+={0,2}$/.test(value)) key = Buffer.from(value, "base64");
  if (key === null || key.length < InstallationSecret.minBytes)
    throw new ConfigError(
      `${origin}: expected 64 hex digits or base64 of at least 32 random bytes (e.g. openssl rand -base64 32)`,
    );
  return new InstallationSecret(key);
}

/**
 * The installation secret: the configured value, or the file's. A missing file is created with a
 * fresh secret, mode 0600, atomically (written aside, then linked into place; of two processes
 * starting at once, one creates it and both read the same).
 */
export function readInstallationSecret(source: InstallationSecretSource): InstallationSecret {
  if (source.from === "value") return source.secret;
  const name = source.variable ?? "installation secret file";
  const read = (): InstallationSecret | null => {
    let text: string;
    try {
      text = readFileSync(source.path, "utf8");
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return null;
      throw new ConfigError(`${name}: cannot read ${source.path} (${(error as NodeJS.ErrnoException).code})`);
    }
    return parseInstallationSecret(`${name} ${source.path}`, text);
  };
  const existing = read();
  if (existing) return existing;
  const aside = `${source.path}.${process.pid}.${randomBytes(4).toString("hex")}`;
  try {
    mkdirSync(dirname(source.path), { recursive: true, mode: 0o700 });
    writeFileSync(aside, `${randomBytes(InstallationSecret.minBytes).toString("base64")}\n`, {
      mode: 0o600,
      flag: "wx",
    });
    chmodSync(aside, 0o600);
    linkSync(aside, source.path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST")
      throw new ConfigError(
        `${name}: cannot create ${source.path} (${(error as NodeJS.ErrnoException).code}); set INSTALLATION_SECRET_FILE to a writable place or INSTALLATION_SECRET`,
      );
  } finally {
    rmSync(aside, { force: true });
  }
  const created = read();
  if (!created) throw new ConfigError(`${name}: ${source.path} vanished after it was created`);
  return created;
}
