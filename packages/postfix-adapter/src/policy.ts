/**
 * Postfix's SMTP access policy delegation protocol (SMTPD_POLICY_README): a request is
 * `name=value` lines ended by an empty line, the answer `action=<action>` and an empty line; one
 * connection carries many requests.
 *
 * The sending quota: each authenticated sender (`sasl_username`) may send `per_hour` and `per_day`
 * messages (GET /api/mta/smtp_quota; 0 = unlimited) within sliding windows of one hour and one day.
 *
 * - Counted at `protocol_state=END-OF-MESSAGE` (smtpd_end_of_data_restrictions): one per message,
 *   whatever its recipients, and only for mail that got that far. The check and the count are one
 *   atomic step, so concurrent sessions of one sender cannot both take the last message.
 * - Checked without counting at every other stage (RCPT in smtpd_recipient_restrictions), so a
 *   used-up sender is refused before the message is transferred.
 * - Used up: `DEFER_IF_PERMIT` (450 4.7.1) with the limit in the text, at either stage. A quota is
 *   temporary by nature: a relaying client keeps the mail and retries once the window moves on,
 *   where a REJECT (5xx) would bounce it for good.
 * - No `sasl_username` (unauthenticated, e.g. incoming mail), no quota known for it (404), or
 *   both limits 0: DUNNO.
 * - Fail-open: the service or Redis not answering gives DUNNO and a warning in the log. A quota
 *   outage must not stop the mail of every user; the service's outage is visible in the metrics.
 */
import type { Socket } from "node:net";
import type { Logger } from "pino";
import type { Metrics } from "./metrics.ts";
import { type ServiceClient, ServiceUnavailable, type SmtpQuota } from "./service-client.ts";
import { Listener } from "./tcp.ts";

export const HOUR_MS = 3_600_000;
export const DAY_MS = 86_400_000;

/** Longest request; Postfix's are about 1 KiB (with a long client certificate subject a few). */
export const MAX_POLICY_REQUEST_BYTES = 64 * 1024;

export type Limits = SmtpQuota;

export interface Usage {
  /** True when the sender was below both limits (before this message was recorded). */
  allowed: boolean;
  /** Messages in the last hour and the last day, this one included when it was recorded. */
  hour: number;
  day: number;
}

/** The sliding-window counters: in memory (memory.ts) or in Redis, shared by adapters (redis.ts). */
export interface QuotaCounters {
  readonly kind: "memory" | "redis";
  /**
   * Counts the sender's messages in the windows; when `record` is set and the sender is within
   * both limits, records one more message in the same atomic step.
   */
  use(sender: string, limits: Limits, record: boolean): Promise<Usage>;
  /** A one-word state for /health: "memory", "ready" or "unavailable". */
  state(): string;
  close(): Promise<void>;
}

/** Stands for the counters when Redis cannot answer: the policy then lets mail pass. */
export class CountersUnavailable extends Error {
  constructor(message: string) {
    super(message);
    this.name = "CountersUnavailable";
  }
}

export interface PolicyOptions {
  client: ServiceClient;
  counters: QuotaCounters;
  logger: Logger;
  metrics: Metrics;
  maxConnections?: number;
  idleTimeoutMs?: number;
}

type Attributes = Map<string, string>;

/** The action for one well-formed request (without `action=`). */
export async function decide(options: PolicyOptions, request: Attributes): Promise<string> {
  const { client, counters, logger, metrics } = options;
  const dunno = (reason: string) => {
    metrics.policyRequests.inc({ action: "dunno", reason });
    return "DUNNO";
  };
  const sender = (request.get("sasl_username") ?? "").trim().toLowerCase();
  if (sender === "") return dunno("unauthenticated");
  const stage = (request.get("protocol_state") ?? "").toUpperCase();
  const record = stage === "END-OF-MESSAGE";

  let limits: SmtpQuota | null;
  try {
    limits = await client.smtpQuota(sender);
  } catch (error) {
    if (!(error instanceof ServiceUnavailable)) throw error;
    metrics.policyFailOpen.inc({ cause: "service" });
    logger.warn(
      { sender, stage, err: error.message },
      "quota not checked (service unavailable): mail let through",
    );
    return dunno("fail-open");
  }
  if (limits === null) return dunno("no-quota");
  if (limits.perHour === 0 && limits.perDay === 0) return dunno("unlimited");

  let usage: Usage;
  try {
    usage = await counters.use(sender, limits, record);
  } catch (error) {
    metrics.policyFailOpen.inc({ cause: "redis" });
    logger.warn(
      { sender, stage, err: error instanceof Error ? error.message : String(error) },
      "quota not checked (counters unavailable): mail let through",
    );
    return dunno("fail-open");
  }
  if (usage.allowed) {
    logger.debug({ sender, stage, hour: usage.hour, day: usage.day, recorded: record }, "within quota");
    return dunno(record ? "counted" : "within-quota");
  }
  const byDay = limits.perDay > 0 && usage.day >= limits.perDay;
  const text = byDay
    ? `at most ${limits.perDay} messages per day`
    : `at most ${limits.perHour} messages per hour`;
  metrics.policyRequests.inc({ action: "defer_if_permit", reason: byDay ? "per-day" : "per-hour" });
  logger.info(
    { sender, stage, hour: usage.hour, day: usage.day, perHour: limits.perHour, perDay: limits.perDay },
    "sending quota used up: mail deferred",
  );
  return `DEFER_IF_PERMIT 4.7.1 Sending quota exceeded (${text}), try again later`;
}

/** Reading pauses while this many sent-ahead requests wait for their answers. */
const MAX_QUEUED_REQUESTS = 64;

const MALFORMED = "DEFER_IF_PERMIT 4.3.5 Malformed policy request";

export function createPolicyListener(options: PolicyOptions): Listener {
  const { logger, metrics } = options;
  return new Listener({
    name: "policy",
    metrics,
    logger,
    maxConnections: options.maxConnections ?? 1000,
    // Postfix closes its idle policy connections after 300 s (smtpd_policy_service_max_idle).
    idleTimeoutMs: options.idleTimeoutMs ?? 600_000,
    open(socket: Socket) {
      const session = { busy: false };
      let closed = false;
      let text = "";
      /** Requests received whole, waiting to be answered in order. */
      const queue: Array<Attributes | string> = [];
      socket.setEncoding("utf8");
      socket.on("close", () => {
        closed = true;
      });

      const refuse = (kind: string, message: string) => {
        metrics.protocolErrors.inc({ listener: "policy", kind });
        metrics.policyRequests.inc({ action: "defer_if_permit", reason: "bad-input" });
        logger.warn(
          { listener: "policy", remote: socket.remoteAddress, err: message },
          "bad input: closing the connection",
        );
        socket.end(`action=${MALFORMED}\n\n`, () => socket.destroy());
        closed = true;
      };

      const pump = async () => {
        if (session.busy) return;
        session.busy = true;
        try {
          while (!closed && queue.length > 0) {
            const request = queue.shift() as Attributes | string;
            if (typeof request === "string") {
              refuse(request, request === "too-large" ? "request too large" : "malformed request");
              return;
            }
            let action: string;
            try {
              action = await decide(options, request);
            } catch (error) {
              // A fault of ours: fail open like an outage, and say so.
              logger.error(
                { err: error instanceof Error ? error.message : String(error) },
                "policy request failed",
              );
              metrics.policyFailOpen.inc({ cause: "internal" });
              action = "DUNNO";
            }
            if (closed) return;
            if (!request.has("sasl_username")) {
              // Postfix always sends the attribute (empty when unauthenticated): this is another client.
              metrics.protocolErrors.inc({ listener: "policy", kind: "no-sasl-username" });
              socket.end(`action=${action}\n\n`, () => socket.destroy());
              closed = true;
              return;
            }
            socket.write(`action=${action}\n\n`);
          }
        } finally {
          session.busy = false;
          if (!closed && queue.length === 0 && socket.isPaused()) socket.resume();
        }
      };

      socket.on("data", (chunk: string) => {
        if (closed) return;
        text += chunk;
        for (;;) {
          // Postfix ends lines with LF; a CR before it (a person typing into nc) is tolerated.
          const end = /\r?\n\r?\n/.exec(text);
          if (end === null) break;
          queue.push(parseRequest(text.slice(0, end.index)));
          text = text.slice(end.index + end[0].length);
        }
        // A request that never ends: no Postfix sends this much.
        if (text.length > MAX_POLICY_REQUEST_BYTES) {
          queue.push("too-large");
          text = "";
          socket.pause();
        } else if (queue.length > MAX_QUEUED_REQUESTS) {
          socket.pause();
        }
        void pump();
      });
      return session;
    },
  });
}

/** The attributes of one request, or a string naming what is wrong with it. */
export function parseRequest(block: string): Attributes | string {
  if (block.length > MAX_POLICY_REQUEST_BYTES) return "too-large";
  const attributes: Attributes = new Map();
  for (const line of block.split(/\r?\n/)) {
    const equals = line.indexOf("=");
    if (equals <= 0) return "malformed";
    attributes.set(line.slice(0, equals), line.slice(equals + 1));
  }
  if (attributes.get("request") !== "smtpd_access_policy") return "malformed";
  return attributes;
}
