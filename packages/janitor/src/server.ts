/**
 * HTTP side of the janitor: POST /service takes the service's webhooks (signature first), GET /health
 * answers for monitoring. Anything else: 404, or 405 for a known path with the wrong method.
 */
import { createHash, createHmac, timingSafeEqual } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { Logger } from "pino";
import { formatTimestamp, type PendingStore, parseTimestamp } from "./pending.ts";
import type { Purger } from "./purger.ts";
import { type Delivery, FRESHNESS_MS, type SeenDeliveries } from "./seen.ts";
import { parsePurgeAddress } from "./shell.ts";

export const MAX_BODY_BYTES = 64 * 1024;

export interface ServerOptions {
  secret: string;
  store: PendingStore;
  seen: SeenDeliveries;
  purger: Purger;
  logger: Logger;
  maxBodyBytes?: number;
}

/** Checks `X-Webhook-Signature`: lower-case hex HMAC-SHA256 of the raw body, compared in constant time. */
export function verifySignature(secret: string, body: Buffer, header: string): boolean {
  if (!/^[0-9a-fA-F]{64}$/.test(header)) return false;
  const expected = createHmac("sha256", secret).update(body).digest();
  return timingSafeEqual(expected, Buffer.from(header, "hex"));
}

export function signBody(secret: string, body: string | Buffer): string {
  return createHmac("sha256", secret).update(body).digest("hex");
}

/**
 * Why a webhook's signed timestamp is refused, or null when it is fresh: within FRESHNESS_MS of the
 * receipt, either way. Without it a captured delivery could be replayed at will.
 */
export function staleness(timestamp: unknown, receivedAt: Date): string | null {
  if (typeof timestamp !== "string") return 'timestamp: missing (the signed body must carry "timestamp")';
  const parsed = parseTimestamp(timestamp);
  if (!parsed) return "timestamp: not an RFC 3339 date-time with a zone";
  const offset = parsed.getTime() - receivedAt.getTime();
  if (offset < -FRESHNESS_MS)
    return `timestamp: ${Math.round(-offset / 1000)} s old, more than ${FRESHNESS_MS / 1000} s: stale delivery refused`;
  if (offset > FRESHNESS_MS)
    return `timestamp: ${Math.round(offset / 1000)} s in the future, more than ${FRESHNESS_MS / 1000} s: refused`;
  return null;
}

/** The time of a user.deleted event: its own (fresh) timestamp, or the receipt time when that is ahead of it. */
export function eventTime(timestamp: Date, receivedAt: Date): Date {
  return timestamp.getTime() > receivedAt.getTime() ? receivedAt : timestamp;
}

class BodyTooLarge extends Error {}

function readBody(request: IncomingMessage, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const declared = Number(request.headers["content-length"]);
    if (Number.isFinite(declared) && declared > limit) {
      reject(new BodyTooLarge());
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    let done = false;
    request.on("data", (chunk: Buffer) => {
      if (done) return;
      size += chunk.length;
      if (size > limit) {
        done = true;
        reject(new BodyTooLarge());
        return;
      }
      chunks.push(chunk);
    });
    request.on("end", () => {
      if (done) return;
      done = true;
      resolve(Buffer.concat(chunks));
    });
    request.on("error", (error) => {
      if (done) return;
      done = true;
      reject(error);
    });
  });
}

function send(
  response: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  if (response.headersSent) return;
  const text = typeof body === "string" ? body : JSON.stringify(body);
  response.writeHead(status, {
    "Content-Type": typeof body === "string" ? "text/plain; charset=utf-8" : "application/json",
    "Content-Length": Buffer.byteLength(text),
    ...headers,
  });
  response.end(text);
}

interface WebhookPayload {
  type: string;
  timestamp: unknown;
  email: unknown;
}

function parsePayload(body: Buffer): WebhookPayload | string {
  let payload: unknown;
  try {
    payload = JSON.parse(body.toString("utf8"));
  } catch {
    return "body is not valid JSON";
  }
  if (typeof payload !== "object" || payload === null || Array.isArray(payload))
    return "body is not a JSON object";
  const { type, timestamp, data } = payload as Record<string, unknown>;
  if (typeof type !== "string" || type === "") return 'missing "type"';
  const email =
    typeof data === "object" && data !== null ? (data as Record<string, unknown>)["email"] : undefined;
  return { type, timestamp, email };
}

export function createJanitorServer(options: ServerOptions): Server {
  const log = options.logger.child({ component: "server" });
  const limit = options.maxBodyBytes ?? MAX_BODY_BYTES;

  async function handleWebhook(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const receivedAt = new Date();
    const signature = request.headers["x-webhook-signature"];
    if (typeof signature !== "string" || signature === "") {
      log.warn({ remote: request.socket.remoteAddress }, "webhook without signature rejected");
      send(response, 401, { message: "missing X-Webhook-Signature" }, { Connection: "close" });
      return;
    }
    if (!/^[0-9a-fA-F]{64}$/.test(signature)) {
      log.warn({ remote: request.socket.remoteAddress }, "webhook with malformed signature rejected");
      send(response, 401, { message: "invalid signature" }, { Connection: "close" });
      return;
    }
    let body: Buffer;
    try {
      body = await readBody(request, limit);
    } catch (error) {
      if (error instanceof BodyTooLarge) {
        send(response, 413, { message: `body larger than ${limit} bytes` }, { Connection: "close" });
      } else {
        log.warn({ err: String(error) }, "could not read webhook body");
        send(response, 400, { message: "could not read body" }, { Connection: "close" });
      }
      return;
    }
    if (!verifySignature(options.secret, body, signature)) {
      log.warn({ remote: request.socket.remoteAddress }, "webhook with wrong signature rejected");
      send(response, 401, { message: "invalid signature" });
      return;
    }

    const payload = parsePayload(body);
    if (typeof payload === "string") {
      send(response, 400, { message: payload });
      return;
    }
    const deliveryId =
      typeof request.headers["x-webhook-id"] === "string" ? request.headers["x-webhook-id"] : undefined;
    const attempt = request.headers["x-webhook-attempt"];
    const eventLog = log.child({ event: payload.type, deliveryId, attempt });
    if (payload.type !== "user.deleted" && payload.type !== "user.reset") {
      eventLog.debug("event type ignored");
      send(response, 200, { status: "ignored" });
      return;
    }
    // A stale body may be a captured one played back; a body from the future could be kept and
    // played back later. 400: the service's worker retries any non-2xx only as often as
    // WEBHOOK_RETRY_DELAYS says, then marks the delivery failed (docs/janitor.md).
    const stale = staleness(payload.timestamp, receivedAt);
    if (stale !== null) {
      eventLog.warn(
        { timestamp: payload.timestamp, reason: stale },
        "webhook with a stale timestamp refused",
      );
      send(response, 400, { message: stale });
      return;
    }
    const timestamp = parseTimestamp(payload.timestamp as string) as Date;
    const check = parsePurgeAddress(payload.email);
    if (!check.ok) {
      eventLog.warn(
        { email: payload.email, reason: check.reason },
        "webhook with unacceptable address refused",
      );
      send(response, 400, { message: `data.email: ${check.reason}` });
      return;
    }
    const { address } = check;
    const delivery: Delivery = {
      id: deliveryId ?? null,
      body: createHash("sha256").update(body).digest("hex"),
      timestamp,
    };
    // Recorded before anything is done, so that the command runs at most once per delivery.
    if ((await options.seen.claim(delivery, receivedAt)) === "seen") {
      eventLog.info({ email: address.email }, "delivery already handled: nothing done");
      send(response, 200, { status: "duplicate delivery" });
      return;
    }

    try {
      if (payload.type === "user.deleted") {
        const at = eventTime(timestamp, receivedAt);
        const result = await options.store.add(address.email, at);
        eventLog.info(
          { email: address.email, timestamp: formatTimestamp(at), result },
          "pending deletion recorded",
        );
        send(response, 200, { status: result === "exists" ? "already pending" : "recorded" });
      } else {
        // Written ahead as due now: if the janitor dies during the purge, the next tick retries it.
        const result = await options.store.add(address.email, options.purger.dueNowTimestamp(receivedAt), {
          advance: true,
        });
        eventLog.info({ email: address.email, result }, "reset: purging mailbox now");
        void options.purger.purge(address, "user.reset");
        send(response, 200, { status: "purging" });
      }
    } catch (error) {
      eventLog.error({ email: address.email, err: String(error) }, "could not record the event");
      // Not handled: the service's retry of this delivery must be taken.
      await options.seen.release(delivery).catch((failure: unknown) => {
        eventLog.error({ err: String(failure) }, "could not forget the delivery");
      });
      send(response, 500, { message: "could not store the event" });
    }
  }

  const server = createServer((request, response) => {
    const path = (request.url ?? "/").split("?")[0];
    if (path === "/health") {
      if (request.method === "GET" || request.method === "HEAD") {
        send(response, 200, "OK");
      } else {
        send(response, 405, { message: "method not allowed" }, { Allow: "GET, HEAD" });
      }
      return;
    }
    if (path === "/service") {
      if (request.method !== "POST") {
        send(response, 405, { message: "method not allowed" }, { Allow: "POST" });
        return;
      }
      handleWebhook(request, response).catch((error: unknown) => {
        log.error({ err: String(error) }, "webhook handling failed");
        send(response, 500, { message: "internal error" });
      });
      return;
    }
    send(response, 404, { message: "not found" });
  });
  server.headersTimeout = 10_000;
  server.requestTimeout = 30_000;
  server.keepAliveTimeout = 5_000;
  return server;
}
