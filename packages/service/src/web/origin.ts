import { randomBytes } from "node:crypto";
import type { FastifyReply, FastifyRequest } from "fastify";
import type { CheckOrigin } from "../accounts/sign-in.ts";
import { signalOnClose } from "../credentials/crypto-pool.ts";

/**
 * The device cookie: a random value a browser keeps after a whole sign-in (password and second
 * factor), so the sign-in guard knows it as a client of that account that signed in before, which
 * an attacker's failures elsewhere never hold back. It grants nothing by itself.
 */
const deviceCookie = (secure: boolean) => (secure ? "__Host-device" : "device");
const deviceLifetimeSeconds = 180 * 86_400;
const devicePattern = /^[A-Za-z0-9_-]{43}$/;

const deviceOf = (request: FastifyRequest): string | undefined => {
  const value = request.cookies[deviceCookie(request.protocol === "https")];
  return value !== undefined && devicePattern.test(value) ? value : undefined;
};

/** Where a check of a secret on a page comes from: the web door, its client address and device. */
export const webOrigin = (request: FastifyRequest, reply: FastifyReply): CheckOrigin => ({
  door: "web",
  client: { address: request.ip, device: deviceOf(request) },
  signal: signalOnClose(reply.raw),
});

/**
 * A new device value for this browser, set now: after every whole sign-in, so a value planted in the
 * browser by someone else (a sibling host's cookie) never becomes trusted.
 */
export function newDevice(request: FastifyRequest, reply: FastifyReply): string {
  const secure = request.protocol === "https";
  const device = randomBytes(32).toString("base64url");
  reply.setCookie(deviceCookie(secure), device, {
    path: "/",
    httpOnly: true,
    sameSite: "lax",
    secure,
    maxAge: deviceLifetimeSeconds,
  });
  return device;
}
