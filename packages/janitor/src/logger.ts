import { type DestinationStream, type Logger, pino } from "pino";
import type { LogLevel } from "./config.ts";

/** Fields that may hold secrets; pino replaces them before anything is written. */
const redactedPaths = ["secret", "*.secret", "token", "*.token", "req.headers.authorization"];

/**
 * The janitor's logger, in the shape of the service's (packages/service/src/logger.ts): pino's
 * defaults (numeric `level`, `time` in epoch milliseconds, no pid or hostname) and a `service`
 * field, so one log pipeline reads both.
 */
export function createLogger(level: LogLevel, destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      redact: { paths: redactedPaths, censor: "[redacted]" },
      base: { service: "mailbox-janitor" },
    },
    destination ?? process.stdout,
  );
}
