import { STATUS_CODES } from "node:http";
import type { Socket } from "node:net";
import type { FastifyError, FastifyReply, FastifyRequest } from "fastify";
import { driverFault, isDatabaseUnavailable } from "../db/unavailable.ts";
import { databaseUnavailable, retryAfterOf, ServiceError, statusOfKind } from "../errors.ts";
import { faultOf } from "../logger.ts";

/** A refusal's status and `{"message"}`; a throttled one says when to come back. */
export function refusalAnswer(reply: FastifyReply, error: ServiceError): FastifyReply {
  const retryAfter = retryAfterOf(error);
  if (retryAfter !== undefined) reply.header("retry-after", String(retryAfter));
  return plainError(reply, statusOfKind[error.kind], error.apiText());
}

/**
 * A 404 given as the handler's answer instead of thrown, for the lookups mail servers make for
 * every message and login (userdb, smtp_quota): a third of their keys are unknown or deleted,
 * and a throw through Fastify's error path costs more than a whole found answer
 * (bench/README.md#what-profiling-showed-and-what-changed).
 * The body is the one `errorHandler` gives a thrown not-found.
 */
export function notFoundAnswer(reply: FastifyReply, message: string): { message: string } {
  reply.code(404);
  return { message };
}

/**
 * An error answer: `{"message": ...}` as JSON text, so that no route's response schema (which
 * describes the route's own answers for the status) can reshape or refuse it.
 */
function plainError(reply: FastifyReply, status: number, message: string): FastifyReply {
  return reply.code(status).type("application/json; charset=utf-8").send(JSON.stringify({ message }));
}

/** Every error becomes `{"message": ...}` with a 4xx status; a 500 never carries internals. */
export function errorHandler(error: FastifyError | Error, request: FastifyRequest, reply: FastifyReply) {
  if (error instanceof ServiceError) return refusalAnswer(reply, error);
  const fastifyError = error as FastifyError;
  if (fastifyError.validation) {
    return plainError(
      reply,
      422,
      `${fastifyError.validationContext ?? "request"}: ${validationText(fastifyError)}`,
    );
  }
  switch (fastifyError.code) {
    case "FST_ERR_CTP_INVALID_MEDIA_TYPE":
      return plainError(reply, 415, "Unsupported format.");
    case "FST_ERR_CTP_BODY_TOO_LARGE":
      return plainError(
        reply,
        413,
        `Request body too large (limit ${byteSize(request.routeOptions.bodyLimit)}).`,
      );
    case "FST_ERR_CTP_INVALID_CONTENT_LENGTH":
      return plainError(reply, 400, "Invalid Content-Length.");
  }
  if (error instanceof SyntaxError || fastifyError.statusCode === 400) {
    const form = String(request.headers["content-type"] ?? "").includes("form");
    return plainError(reply, 400, `Request payload contains invalid "${form ? "form" : "json"}" data.`);
  }
  if (isDatabaseUnavailable(error)) {
    request.log.warn({ err: driverFault(error) }, "database unavailable");
    return refusalAnswer(reply, databaseUnavailable());
  }
  const status = fastifyError.statusCode;
  if (status !== undefined && status >= 400 && status < 500) {
    // Another framework error: its message may echo the URL or name internals.
    return plainError(reply, status, STATUS_CODES[status] ?? "Bad request");
  }
  request.log.error({ err: faultOf(error) }, "request failed");
  return plainError(reply, 500, "internal error");
}

/**
 * Fastify's `frameworkErrors`: a path that is not percent-encoded UTF-8 (`%zz`, `%FF`, an encoded
 * surrogate) or a path parameter past the router's limit. Answered before any route or token check,
 * like every error with `{"message": ...}` only: Fastify's own body names its error code and echoes the URL.
 */
export function frameworkErrorHandler(error: FastifyError, _request: FastifyRequest, reply: FastifyReply) {
  if (error.code === "FST_ERR_MAX_PARAM_LENGTH") return plainError(reply, 414, "URI too long");
  if (error.code === "FST_ERR_BAD_URL") return plainError(reply, 400, "invalid URL encoding");
  return plainError(reply, 500, "internal error");
}

/**
 * Node's `clientError`: a request Node could not parse (a bad header, a request line or headers past
 * `maxHeaderSize`, a client too slow). The same `{"message": ...}` as every other error, then the
 * connection closes (Fastify's default answers with its own error shape).
 */
export function clientErrorHandler(error: NodeJS.ErrnoException, socket: Socket) {
  if (error.code === "ECONNRESET" || socket.destroyed) return;
  const [status, message] =
    error.code === "ERR_HTTP_REQUEST_TIMEOUT"
      ? [408, "request timeout"]
      : error.code === "HPE_HEADER_OVERFLOW"
        ? [431, "request line or headers too large"]
        : [400, "malformed request"];
  const body = JSON.stringify({ message });
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nContent-Type: application/json; charset=utf-8\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy(error);
}

/** 65536 -> "64 KiB", 2097152 -> "2 MiB". */
function byteSize(bytes: number): string {
  const mib = 1024 * 1024;
  return bytes % mib === 0 ? `${bytes / mib} MiB` : `${Math.round(bytes / 1024)} KiB`;
}

function validationText(error: FastifyError): string {
  const first = error.validation?.[0];
  if (!first) return "is invalid";
  const where = first.instancePath ? first.instancePath.slice(1).replaceAll("/", ".") : "";
  const missing = (first.params as { missingProperty?: string } | undefined)?.missingProperty;
  if (missing) return `${missing} is required`;
  return `${where || "value"} ${first.message ?? "is invalid"}`;
}
