/**
 * Errors the services raise for expected business outcomes. The HTTP layer maps each kind to a
 * status code and the console prints the message; neither needs to know the rule behind it.
 */
export class ServiceError extends Error {
  readonly kind: "not_found" | "conflict" | "invalid" | "bad_request" | "unavailable";
  constructor(kind: ServiceError["kind"], message: string) {
    super(message);
    this.kind = kind;
  }
}

export const notFound = (message: string) => new ServiceError("not_found", message);
export const conflict = (message: string) => new ServiceError("conflict", message);
export const invalid = (message: string) => new ServiceError("invalid", message);
export const badRequest = (message: string) => new ServiceError("bad_request", message);
