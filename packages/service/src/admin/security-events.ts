import { type Actor, domainScope } from "../accounts/admin-scope.ts";
import type { Listing } from "../accounts/paging.ts";
import type {
  SecurityEventFilter,
  SecurityEventLog,
  SecurityEventPage,
  SecurityEventRecord,
} from "../accounts/security-events.ts";

/**
 * The security event log as administrators read it (the admin API, the admin area): an admin
 * reads every event, a domain admin those of accounts of its own domain, whatever the filter asks.
 */
export class AdminSecurityEvents {
  readonly #log: SecurityEventLog;

  constructor(log: SecurityEventLog) {
    this.#log = log;
  }

  list(
    actor: Actor,
    filter: Omit<SecurityEventFilter, "domainIds" | "userId">,
    page: SecurityEventPage,
  ): Promise<Listing<SecurityEventRecord>> {
    const scope = domainScope(actor);
    return this.#log.list({ ...filter, ...(scope === null ? {} : { domainIds: [scope] }) }, page);
  }
}
