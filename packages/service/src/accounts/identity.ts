import type { Kysely } from "kysely";
import type { Database } from "../db/schema.ts";
import { toFlag } from "../db/schema.ts";
import { notFound } from "../errors.ts";
import { parseAddress, parseDomain } from "./addresses.ts";
import { containsText } from "./paging.ts";
import type { User, UserService } from "./users.ts";

export interface IdentityUser {
  id: string;
  email: string;
}

const activeFlag = toFlag(false);

export const identityUser = (email: string): IdentityUser => ({
  id: email.slice(0, email.lastIndexOf("@")),
  email,
});

/** The identity provider's user storage: every answer is scoped to one managed domain and leaves deleted users out. */
export class IdentityService {
  readonly #db: Kysely<Database>;
  readonly #users: UserService;

  constructor(db: Kysely<Database>, users: UserService) {
    this.#db = db;
    this.#users = users;
  }

  async domainId(rawDomain: string): Promise<number> {
    const name = parseDomain(rawDomain);
    const row = name
      ? await this.#db.selectFrom("domains").select("id").where("name", "=", name).executeTakeFirst()
      : undefined;
    if (!row) throw notFound("domain not found");
    return row.id;
  }

  async search(domainId: number, search: string, max: number, first: number): Promise<IdentityUser[]> {
    let query = this.#db
      .selectFrom("users")
      .select("email")
      .where("domain_id", "=", domainId)
      .where("deleted", "=", activeFlag);
    if (search !== "") query = query.where(containsText("email", search));
    const rows = await query.orderBy("email").limit(max).offset(first).execute();
    return rows.map((row) => identityUser(row.email));
  }

  async count(domainId: number): Promise<number> {
    const row = await this.#db
      .selectFrom("users")
      .select((eb) => eb.fn.countAll<number>().as("count"))
      .where("domain_id", "=", domainId)
      .where("deleted", "=", activeFlag)
      .executeTakeFirstOrThrow();
    return Number(row.count);
  }

  /** A user of the domain; a bare local part is completed with the domain. */
  async user(domainId: number, domainName: string, rawEmail: string): Promise<User> {
    const full = rawEmail.includes("@") ? rawEmail : `${rawEmail}@${domainName}`;
    const address = parseAddress(full);
    const user = address ? await this.#users.findByEmail(address.email) : null;
    if (!user || user.deleted || user.domainId !== domainId) throw notFound("user not found");
    return user;
  }
}
