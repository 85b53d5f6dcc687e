/**
 * Errors the services raise for expected business outcomes. The HTTP layer maps each kind to a
 * status code and the console prints the message; neither needs to know the rule behind it.
 */
export class ServiceError extends Error {
  readonly kind: "not_found" | "conflict" | "invalid" | "bad_request" | "forbidden" | "unavailable";
  constructor(kind: ServiceError["kind"], message: string) {
    // An answer, not a fault: it is never logged with a stack, and capturing one (a walk of the JS
    // stack) cost more than the lookup that answers "not found" with it.
    const stackTraceLimit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    try {
      super(message);
    } finally {
      Error.stackTraceLimit = stackTraceLimit;
    }
    this.kind = kind;
  }
}

export const notFound = (message: string) => new ServiceError("not_found", message);
export const conflict = (message: string) => new ServiceError("conflict", message);
export const invalid = (message: string) => new ServiceError("invalid", message);
export const badRequest = (message: string) => new ServiceError("bad_request", message);
/** The actor may not do this (accounts/admin-scope.ts): a domain admin outside its domain. */
export const forbidden = (message: string) => new ServiceError("forbidden", message);
