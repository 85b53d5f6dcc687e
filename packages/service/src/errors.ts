/**
 * Refusals: the expected "no" of a service, as values. Each rule declares its refusals beside it with
 * `refusal(code, kind, text)`; a service throws one (`throw userNotFound()`), and each surface maps it
 * by its code: the APIs to a status (by `kind`) and `{"message": text}`, the pages to a form field and
 * the catalogue's `refusal.<code>` text in the reader's language, the console to the catalogue's
 * English. No surface reads an error's message: the code and parameters are the contract.
 */

/** What kind of "no" it is; the APIs answer each with one status (http/errors.ts). */
export type RefusalKind =
  | "not_found"
  | "conflict"
  | "invalid"
  | "bad_request"
  | "forbidden"
  | "throttled"
  | "unavailable";

/** The HTTP status each kind is answered with, by the APIs and the pages alike. */
export const statusOfKind: Readonly<Record<RefusalKind, number>> = {
  not_found: 404,
  conflict: 409,
  invalid: 422,
  bad_request: 400,
  forbidden: 403,
  throttled: 429,
  unavailable: 503,
};

type NoParams = Record<never, never>;

export interface RefusalDefinition<P extends object = NoParams> {
  readonly code: string;
  readonly kind: RefusalKind;
  /** The English text of the APIs' `{"message"}`: userli's clients compare these bytes. */
  readonly apiText: (params: P) => string;
  /** A refusal of this kind, to throw. */
  (...params: keyof P extends never ? [] : [P]): ServiceError<P>;
}

/** Any refusal, whatever its parameters (a surface's table of codes). */
// biome-ignore lint/suspicious/noExplicitAny: the parameters differ from refusal to refusal
export type AnyRefusal = RefusalDefinition<any>;

const declared = new Map<string, AnyRefusal>();

/**
 * Declares a refusal. The code is stable (surfaces, tests and the catalogue key on it) and unique:
 * declaring one twice is a start-up error.
 */
export function refusal<P extends object = NoParams>(
  code: string,
  kind: RefusalKind,
  apiText: (params: P) => string,
): RefusalDefinition<P> {
  if (declared.has(code)) throw new Error(`refusal ${code} is declared twice`);
  const make = (...args: [P] | []) => new ServiceError(definition, (args[0] ?? {}) as P);
  const definition = Object.assign(make, { code, kind, apiText }) as unknown as RefusalDefinition<P>;
  declared.set(code, definition);
  return definition;
}

/** Every refusal declared so far (the catalogue test checks each has its texts). */
export const declaredRefusals = (): readonly AnyRefusal[] => [...declared.values()];

export class ServiceError<P extends object = object> extends Error {
  /** Typed loosely, so that a refusal of any parameters is a `ServiceError`; `is` narrows it. */
  readonly definition: RefusalDefinition<never>;
  readonly params: P;
  /** The definition's code and kind, as plain fields: frameworks write `code`/`statusCode` on errors. */
  readonly code: string;
  readonly kind: RefusalKind;

  constructor(definition: RefusalDefinition<P>, params: P) {
    // An answer, not a fault: it is never logged with a stack, and capturing one (a walk of the JS
    // stack) cost more than the lookup that answers "not found" with it.
    const stackTraceLimit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    try {
      super(definition.apiText(params));
    } finally {
      Error.stackTraceLimit = stackTraceLimit;
    }
    this.definition = definition as unknown as RefusalDefinition<never>;
    this.params = params;
    this.code = definition.code;
    this.kind = definition.kind;
  }

  /** This refusal, typed by its definition. */
  is<Q extends object>(definition: RefusalDefinition<Q>): this is ServiceError<Q> {
    return (this.definition as unknown) === definition;
  }

  /** The APIs' English text of this refusal. */
  apiText(): string {
    return (this.definition.apiText as (params: P) => string)(this.params);
  }
}

export const isRefusal = <Q extends object>(
  error: unknown,
  definition: RefusalDefinition<Q>,
): error is ServiceError<Q> => error instanceof ServiceError && error.is(definition);

/** The database did not answer (db/unavailable.ts tells a driver's fault): every surface says "try again". */
export const databaseUnavailable = refusal(
  "database.unavailable",
  "unavailable",
  () => "database unavailable, try again",
);

/** The seconds a throttled refusal says to wait (the `Retry-After` of every surface). */
export function retryAfterOf(error: ServiceError): number | undefined {
  const retryAfter = (error.params as { retryAfter?: unknown }).retryAfter;
  return error.kind === "throttled" && typeof retryAfter === "number" ? retryAfter : undefined;
}
