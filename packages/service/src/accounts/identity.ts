import type { Kysely } from "kysely";
import type { Database } from "../db/schema.ts";
import { parseAddress } from "./addresses.ts";
import { domainNotFound } from "./domains.ts";
import { containsText } from "./paging.ts";
import { activeUserRow, isActiveUser, managedDomain } from "./queries.ts";
import { toUser, type User, userNotFound } from "./users.ts";

export interface IdentityUser {
  id: string;
  email: string;
}

export const identityUser = (email: string): IdentityUser => ({
  id: email.slice(0, email.lastIndexOf("@")),
  email,
});

/** The identity provider's user storage: every answer is scoped to one managed domain and leaves deleted users out. */
export class IdentityService {
  readonly #db: Kysely<Database>;

  constructor(db: Kysely<Database>) {
    this.#db = db;
  }

  async domainId(rawDomain: string): Promise<number> {
    const domain = await managedDomain(this.#db, rawDomain);
    if (!domain) throw domainNotFound();
    return domain.id;
  }

  async search(domainId: number, search: string, max: number, first: number): Promise<IdentityUser[]> {
    let query = this.#db
      .selectFrom("users")
      .select("email")
      .where("domain_id", "=", domainId)
      .where(isActiveUser);
    if (search !== "") query = query.where(containsText("email", search));
    const rows = await query.orderBy("email").limit(max).offset(first).execute();
    return rows.map((row) => identityUser(row.email));
  }

  async count(domainId: number): Promise<number> {
    const row = await this.#db
      .selectFrom("users")
      .select((eb) => eb.fn.countAll<number>().as("count"))
      .where("domain_id", "=", domainId)
      .where(isActiveUser)
      .executeTakeFirstOrThrow();
    return Number(row.count);
  }

  /** A user of the domain; a bare local part is completed with the domain. */
  async user(domainId: number, domainName: string, rawEmail: string): Promise<User> {
    const full = rawEmail.includes("@") ? rawEmail : `${rawEmail}@${domainName}`;
    const address = parseAddress(full);
    const row = address ? await activeUserRow(this.#db, address.email) : undefined;
    if (!row || row.domain_id !== domainId) throw userNotFound();
    return toUser(row);
  }
}
