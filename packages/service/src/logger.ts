import { type Bindings, type ChildLoggerOptions, type Logger, pino } from "pino";
import type { LogLevel } from "./config.ts";

export type { Logger };

/** Field paths that may hold secrets; pino replaces them before anything is written. */
export const redactedPaths = [
  "password",
  "*.password",
  "token",
  "*.token",
  "secret",
  "*.secret",
  "privateKey",
  "*.privateKey",
  "recoveryToken",
  "*.recoveryToken",
  "req.headers.authorization",
  "req.headers['x-api-token']",
  "req.headers.cookie",
  // The web pages' fields and cookies, should a request or form ever be logged.
  "newPassword",
  "*.newPassword",
  "currentPassword",
  "*.currentPassword",
  "_csrf",
  "*._csrf",
  "backupCodes",
  "*.backupCodes",
  "totpSecret",
  "*.totpSecret",
  "setupCode",
  "*.setupCode",
  "res.headers['set-cookie']",
  // mysql2 puts the whole statement, its values filled in (hashes, keys), on its errors.
  "err.sql",
  "*.err.sql",
];

/**
 * What a log line may say of a fault: its type, code, message and stack, never the other fields a
 * driver hangs on it (mysql2's `sql` holds the statement with its values).
 */
export function faultOf(error: unknown): { type: string; code?: unknown; message: string; stack?: string } {
  if (!(error instanceof Error)) return { type: typeof error, message: String(error) };
  const { code } = error as { code?: unknown };
  return {
    type: error.name,
    ...(code === undefined ? {} : { code }),
    message: error.message,
    ...(error.stack === undefined ? {} : { stack: error.stack }),
  };
}

export function createLogger(level: LogLevel, destination?: NodeJS.WritableStream): Logger {
  return pino(
    {
      level,
      redact: { paths: redactedPaths, censor: "[redacted]" },
      base: { service: "mail-account-service" },
    },
    destination ?? process.stdout,
  );
}

type LevelName = "fatal" | "error" | "warn" | "info" | "debug" | "trace";
type LogCall = (...args: unknown[]) => void;

/**
 * A request's logger. Fastify makes a pino child (carrying the request id) for every request, at a
 * cost comparable to a whole lookup, while nearly every request logs nothing at the configured
 * level: this makes the child on the first line actually written, with the same bindings.
 */
export class RequestLogger {
  readonly #parent: Logger;
  readonly #bindings: Bindings;
  readonly #options: ChildLoggerOptions;
  #child: Logger | undefined;

  constructor(parent: Logger, bindings: Bindings, options: ChildLoggerOptions) {
    this.#parent = parent;
    this.#bindings = bindings;
    this.#options = options;
  }

  get #logger(): Logger {
    this.#child ??= this.#parent.child(this.#bindings, this.#options);
    return this.#child;
  }

  get level(): string {
    return (this.#child ?? this.#parent).level;
  }

  set level(level: string) {
    this.#logger.level = level;
  }

  isLevelEnabled(level: string): boolean {
    return (this.#child ?? this.#parent).isLevelEnabled(level);
  }

  #write(level: LevelName, args: unknown[]): void {
    if (this.isLevelEnabled(level)) (this.#logger[level] as LogCall)(...args);
  }

  fatal(...args: unknown[]): void {
    this.#write("fatal", args);
  }
  error(...args: unknown[]): void {
    this.#write("error", args);
  }
  warn(...args: unknown[]): void {
    this.#write("warn", args);
  }
  info(...args: unknown[]): void {
    this.#write("info", args);
  }
  debug(...args: unknown[]): void {
    this.#write("debug", args);
  }
  trace(...args: unknown[]): void {
    this.#write("trace", args);
  }
  silent(): void {}

  child(bindings: Bindings, options?: ChildLoggerOptions): Logger {
    return this.#logger.child(bindings, options);
  }
}
