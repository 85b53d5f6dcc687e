import type { FastifyReply } from "fastify";
import { badRequest, invalid } from "../../errors.ts";

/** Path parameters, query and body as the admin routes read them (no schemas: the services check). */
export type Params = Record<string, string>;
export type Query = Record<string, unknown>;
export type Body = Record<string, unknown>;

/** A missing body is an empty object; anything but a JSON object is refused. */
export const body = (raw: unknown): Body => {
  if (raw === undefined || raw === null) return {};
  if (typeof raw !== "object" || Array.isArray(raw)) throw invalid("body: must be a JSON object");
  return raw as Body;
};

export const numericId = (raw: string | undefined): number => {
  if (!raw || !/^\d{1,10}$/.test(raw)) throw badRequest("id: must be a number");
  return Number(raw);
};

export const created = (reply: FastifyReply, payload: unknown) => reply.code(201).send(payload);
