import { type DestinationStream, type Logger, pino } from "pino";
import type { LogLevel } from "./config.ts";

/** Fields that may hold secrets; pino replaces them before anything is written. */
const redactedPaths = ["password", "*.password", "token", "*.token", "authorization", "*.authorization"];

/**
 * The adapter's logger, in the shape of the service's and the janitor's: pino's defaults (numeric
 * `level`, `time` in epoch milliseconds) and a `service` field, so one log pipeline reads all three.
 */
export function createLogger(level: LogLevel, destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      redact: { paths: redactedPaths, censor: "[redacted]" },
      base: { service: "postfix-adapter" },
    },
    destination ?? process.stdout,
  );
}
