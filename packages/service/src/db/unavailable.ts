/**
 * Whether an error is a connection-level failure of one of the three drivers (the database is down,
 * restarting, unreachable or too slow): every surface answers it with "try again" (503), not as a
 * fault of the request. The drivers name some of these only in their message, so this is the one
 * place that reads a driver's message text.
 */
const unavailableCodes = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "EPIPE",
  "ENOTFOUND",
  "EHOSTUNREACH",
  "PROTOCOL_CONNECTION_LOST",
  "57P01",
  "57P03",
  "08006",
  "08001",
  "08003",
  "SQLITE_BUSY",
  // mysql2's per-query time limit (db/database.ts TimedMysqlPool).
  "PROTOCOL_SEQUENCE_TIMEOUT",
]);

const unavailableTexts =
  /(Connection terminated|connect ECONNREFUSED|timeout exceeded when trying to connect|Pool is closed|Can't add new command when connection is in closed state|connection is in closed state|Query read timeout|Query inactivity timeout)/i;

export function isDatabaseUnavailable(error: unknown): boolean {
  if (!error || typeof error !== "object") return false;
  const { code, message } = error as { code?: unknown; message?: unknown };
  if (typeof code === "string" && unavailableCodes.has(code)) return true;
  return typeof message === "string" && unavailableTexts.test(message);
}

/** The driver's own words for the log (a connection fault names no secret). */
export function driverFault(error: unknown): { message?: unknown; code?: unknown } {
  const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown };
  return { message, code };
}
