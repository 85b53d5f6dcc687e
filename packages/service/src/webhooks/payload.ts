import { createHmac } from "node:crypto";

export const webhookEvents = ["user.created", "user.deleted", "user.reset"] as const;
export type WebhookEvent = (typeof webhookEvents)[number];
export const isWebhookEvent = (value: string): value is WebhookEvent =>
  (webhookEvents as readonly string[]).includes(value);

/** ISO-8601 with an explicit offset, as the reference sends it (PHP DATE_ATOM): 2025-09-10T11:36:14+00:00. */
const atomTimestamp = (date: Date): string => date.toISOString().replace(/\.\d{3}Z$/, "+00:00");

/** The exact bytes of a webhook body; stored once, signed once, sent unchanged on every attempt. */
export const webhookBody = (type: string, email: string, date: Date): string =>
  JSON.stringify({ type, timestamp: atomTimestamp(date), data: { email } });

/** Lower-case hex HMAC-SHA256 of the body bytes under the endpoint's secret. */
export const signWebhookBody = (body: string, secret: string): string =>
  createHmac("sha256", secret).update(body, "utf8").digest("hex");

/**
 * The request headers of one delivery attempt: the worker sends exactly these, and the admin area
 * shows them for a delivery (the body is the stored text, byte for byte).
 */
export const webhookRequestHeaders = (
  delivery: { id: string; signature: string },
  attempt: number,
): Record<string, string> => ({
  "content-type": "application/json",
  "x-webhook-signature": delivery.signature,
  "x-webhook-id": delivery.id,
  "x-webhook-attempt": String(attempt),
  "user-agent": "mail-account-service-webhooks",
});
