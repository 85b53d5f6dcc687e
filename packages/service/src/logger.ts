import { type Logger, pino } from "pino";
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
];

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
