import type { Transaction } from "kysely";
import type { Database } from "../db/schema.ts";

export type AccountEventType = "user.created" | "user.deleted" | "user.reset";

/**
 * Where account changes announce themselves. `record` runs inside the transaction of the change,
 * so an event is stored exactly when the change is (the webhook outbox implements this).
 */
export interface AccountEvents {
  record(
    trx: Transaction<Database>,
    type: AccountEventType,
    user: { email: string; domainId: number },
  ): Promise<void>;
}
