import { randomInt } from "node:crypto";
import type { Kysely } from "kysely";
import { newAddressProblem, parseNewAddress } from "../accounts/addresses.ts";
import type { Actor } from "../accounts/admin-scope.ts";
import { domainNotFound } from "../accounts/domains.ts";
import { checkPasswordShape, type PasswordPolicy } from "../accounts/password-policy.ts";
import { isActiveUser, managedDomain } from "../accounts/queries.ts";
import { checkQuota } from "../accounts/users.ts";
import type { AdminService } from "../admin/service.ts";
import type { Database } from "../db/schema.ts";
import { ServiceError } from "../errors.ts";
import { CsvError, csvLine, parseCsv } from "./csv.ts";

/**
 * Bulk provisioning (`app:users:import --csv`, `POST /api/admin/users/import`): many users at once,
 * each with an optional password (none: a random one), quota, MailCrypt choice and aliases. The
 * whole list is checked before anything is written, and every bad line is reported at once; then
 * each user and alias is created as one at a time is, through the admin services (the actor's
 * reach, the audit log, `user.created`). The passwords made here and the recovery tokens go back to
 * the caller once, to be handed to the users. `importUsers` is the whole flow; the console and the
 * admin API only read their input and show its outcome.
 */

export const provisioningColumns = ["email", "password", "quota", "mailCrypt", "aliases"] as const;
type ProvisioningColumn = (typeof provisioningColumns)[number];

/** One user as a line of the list gives it (CSV text, or JSON values). */
export interface ProvisioningInput {
  line: number;
  email: unknown;
  password?: unknown;
  quota?: unknown;
  mailCrypt?: unknown;
  aliases?: unknown;
}

/** A line that cannot be imported: every problem of it at once. */
export interface LineProblem {
  line: number;
  email: string;
  problems: string[];
}

/** A line checked and ready to create. */
export interface ProvisioningLine {
  line: number;
  email: string;
  /** null: a random one is made. */
  password: string | null;
  quota: number | null;
  mailCrypt: boolean | undefined;
  aliases: string[];
}

export interface ProvisionedUser {
  line: number;
  email: string;
  /** The password made for the user; null when the list gave one. */
  password: string | null;
  recoveryToken: string | null;
  aliases: string[];
}

/** Passwords made here: 20 letters and digits without look-alikes (about 114 bits). */
const passwordAlphabet = "abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789";
export function randomPassword(length = 20): string {
  let password = "";
  for (let i = 0; i < length; i++) password += passwordAlphabet[randomInt(passwordAlphabet.length)];
  return password;
}

/** The lines of a CSV list with a header naming its columns (`email` required, the others optional). */
function inputsFromCsv(text: string): { inputs: ProvisioningInput[]; problems: LineProblem[] } {
  let records: ReturnType<typeof parseCsv>;
  try {
    records = parseCsv(text);
  } catch (error) {
    if (error instanceof CsvError)
      return { inputs: [], problems: [{ line: error.line, email: "", problems: [error.message] }] };
    throw error;
  }
  const [header, ...rows] = records;
  if (!header) return { inputs: [], problems: [{ line: 1, email: "", problems: ["the list is empty"] }] };
  const columns = header.fields.map((name) => name.trim());
  const known = new Map<string, ProvisioningColumn>(provisioningColumns.map((c) => [c.toLowerCase(), c]));
  const unknown = columns.filter((c) => !known.has(c.toLowerCase()));
  const named = columns.map((c) => known.get(c.toLowerCase()));
  const problems: string[] = [];
  if (unknown.length > 0)
    problems.push(
      `unknown columns ${unknown.map((c) => `"${c.slice(0, 40)}"`).join(", ")} (known: ${provisioningColumns.join(", ")})`,
    );
  if (!named.includes("email"))
    problems.push(
      `the first line must name the columns, email among them (${provisioningColumns.join(",")})`,
    );
  const repeated = named.filter((c, i) => c !== undefined && named.indexOf(c) !== i);
  if (repeated.length > 0) problems.push(`column ${repeated[0]} named twice`);
  if (problems.length > 0) return { inputs: [], problems: [{ line: header.line, email: "", problems }] };
  const inputs: ProvisioningInput[] = [];
  const tooWide: LineProblem[] = [];
  for (const row of rows) {
    const input: ProvisioningInput = { line: row.line, email: "" };
    for (const [i, column] of named.entries()) if (column) input[column] = row.fields[i] ?? "";
    if (row.fields.length > columns.length)
      tooWide.push({
        line: row.line,
        email: String(input.email),
        problems: [`${row.fields.length} fields, the header names ${columns.length}`],
      });
    inputs.push(input);
  }
  return { inputs, problems: tooWide };
}

/** The lines of a JSON list: `{"users": [...]}` or the array itself, line = position from 1. */
function inputsFromJson(value: unknown): { inputs: ProvisioningInput[]; problems: LineProblem[] } {
  const list = Array.isArray(value) ? value : (value as { users?: unknown } | null)?.users;
  if (!Array.isArray(list))
    return {
      inputs: [],
      problems: [{ line: 0, email: "", problems: ['users: must be a list of users ({"users": [...]})'] }],
    };
  const inputs: ProvisioningInput[] = [];
  const problems: LineProblem[] = [];
  for (const [i, item] of list.entries()) {
    if (item === null || typeof item !== "object" || Array.isArray(item)) {
      problems.push({
        line: i + 1,
        email: "",
        problems: ["must be an object with email, password, quota, mailCrypt, aliases"],
      });
      continue;
    }
    const record = item as Record<string, unknown>;
    const unknown = Object.keys(record).filter(
      (k) => !(provisioningColumns as readonly string[]).includes(k),
    );
    if (unknown.length > 0)
      problems.push({
        line: i + 1,
        email: typeof record.email === "string" ? record.email : "",
        problems: [`unknown fields ${unknown.map((k) => k.slice(0, 40)).join(", ")}`],
      });
    inputs.push({ line: i + 1, ...record, email: record.email });
  }
  return { inputs, problems };
}

const present = (value: unknown): boolean => value !== undefined && value !== null && value !== "";

/** Yes/no as a list may say it: true/false, yes/no, 1/0; empty is "the setting decides". */
function mailCryptOf(value: unknown): boolean | undefined | null {
  if (!present(value)) return undefined;
  if (typeof value === "boolean") return value;
  const text = String(value).trim().toLowerCase();
  if (["true", "yes", "1", "on"].includes(text)) return true;
  if (["false", "no", "0", "off"].includes(text)) return false;
  return null;
}

/** Alias addresses: a list, or text separated by spaces, commas or semicolons. */
function aliasesOf(value: unknown): string[] | null {
  if (!present(value)) return [];
  if (Array.isArray(value))
    return value.every((v) => typeof v === "string") ? value.map((v) => v.trim()) : null;
  if (typeof value !== "string") return null;
  return value.split(/[\s,;]+/).filter((a) => a !== "");
}

const problemOf = (error: unknown): string => {
  if (error instanceof ServiceError) return error.apiText();
  throw error;
};

/**
 * Checks every line against the rules of a single creation (address, managed domain, address
 * still free, password policy, quota) and against the other lines (an address twice). Nothing is
 * written. Lines with problems are all reported; the others come back ready to create.
 */
async function checkProvisioning(
  db: Kysely<Database>,
  passwordPolicy: PasswordPolicy,
  inputs: ProvisioningInput[],
): Promise<{ lines: ProvisioningLine[]; problems: LineProblem[] }> {
  const domains = new Set((await db.selectFrom("domains").select("name").execute()).map((d) => d.name));
  const firstLine = new Map<string, number>();
  const parsed = inputs.map((input) => {
    const problems: string[] = [];
    const rawEmail = typeof input.email === "string" ? input.email.trim() : "";
    const address = typeof input.email === "string" ? parseNewAddress(rawEmail) : null;
    if (!present(input.email)) problems.push("email: is required");
    else if (!address) problems.push(`email: not a valid e-mail address: ${newAddressProblem(rawEmail)}`);
    else if (!domains.has(address.domain))
      problems.push(`email: domain ${address.domain} is not managed here`);
    let password: string | null = null;
    if (present(input.password)) {
      try {
        password = checkPasswordShape(input.password);
      } catch (error) {
        problems.push(problemOf(error));
      }
    }
    let quota: number | null = null;
    if (present(input.quota)) {
      const raw = typeof input.quota === "string" ? input.quota.trim() : input.quota;
      try {
        quota = checkQuota(typeof raw === "string" && /^\d+$/.test(raw) ? Number(raw) : raw);
      } catch (error) {
        problems.push(problemOf(error));
      }
    }
    const mailCrypt = mailCryptOf(input.mailCrypt);
    if (mailCrypt === null)
      problems.push("mailCrypt: must be true or false (or empty for the setting's choice)");
    const aliasList = aliasesOf(input.aliases);
    const aliases: string[] = [];
    if (aliasList === null) problems.push("aliases: must be addresses separated by spaces");
    for (const raw of aliasList ?? []) {
      const alias = parseNewAddress(raw);
      if (!alias)
        problems.push(
          `aliases: ${raw.slice(0, 100)} is not a valid e-mail address: ${newAddressProblem(raw)}`,
        );
      else if (!domains.has(alias.domain))
        problems.push(`aliases: domain ${alias.domain} is not managed here`);
      else if (!aliases.includes(alias.email)) aliases.push(alias.email);
    }
    const email = address?.email ?? rawEmail;
    for (const claimed of address ? [address.email, ...aliases] : aliases) {
      const earlier = firstLine.get(claimed);
      if (earlier !== undefined && earlier !== input.line)
        problems.push(`${claimed} is also on line ${earlier}`);
      else firstLine.set(claimed, input.line);
    }
    return { input, email, password, quota, mailCrypt, aliases, problems };
  });
  // The whole password rule (a leaked one too) before anything is created, as for a single user.
  for (const entry of parsed) {
    if (entry.password === null) continue;
    try {
      await passwordPolicy.require(entry.password);
    } catch (error) {
      entry.problems.push(problemOf(error));
    }
  }
  // Addresses already taken (by any user or alias, deleted ones included: addresses are never reused).
  const wanted = [...firstLine.keys()];
  const taken = new Set<string>();
  for (let i = 0; i < wanted.length; i += 500) {
    const chunk = wanted.slice(i, i + 500);
    const [users, aliases] = await Promise.all([
      db.selectFrom("users").select("email").where("email", "in", chunk).execute(),
      db.selectFrom("aliases").select("source").where("source", "in", chunk).execute(),
    ]);
    for (const u of users) taken.add(u.email);
    for (const a of aliases) taken.add(a.source);
  }
  const lines: ProvisioningLine[] = [];
  const problems: LineProblem[] = [];
  for (const entry of parsed) {
    for (const address of [entry.email, ...entry.aliases])
      if (taken.has(address)) entry.problems.push(`address ${address} is already taken`);
    if (entry.problems.length > 0)
      problems.push({ line: entry.input.line, email: entry.email, problems: entry.problems });
    else
      lines.push({
        line: entry.input.line,
        email: entry.email,
        password: entry.password,
        quota: entry.quota,
        mailCrypt: entry.mailCrypt ?? undefined,
        aliases: entry.aliases,
      });
  }
  return { lines, problems };
}

/**
 * Creates the checked lines, a few at a time (each creation spends its Argon2 work on the crypto
 * pool), as the actor would one at a time (app:user:create, POST /api/admin/users and their alias
 * counterparts): the actor's reach, the audit log. `onCreated` hears of each user as soon as it
 * exists, so its credentials can be written down before the next is made. A line that fails now
 * (taken meanwhile) is reported, the rest go on.
 */
async function provisionUsers(
  admin: AdminService,
  actor: Actor,
  lines: ProvisioningLine[],
  onCreated: (user: ProvisionedUser) => void | Promise<void> = () => {},
  concurrency = 2,
): Promise<{ created: ProvisionedUser[]; failed: LineProblem[] }> {
  const created: ProvisionedUser[] = [];
  const failed: LineProblem[] = [];
  let next = 0;
  const worker = async () => {
    while (next < lines.length) {
      const line = lines[next++]!;
      const password = line.password ?? randomPassword();
      let recoveryToken: string | null;
      try {
        ({ recoveryToken } = await admin.users.create(actor, {
          email: line.email,
          password,
          quota: line.quota,
          mailCrypt: line.mailCrypt,
        }));
      } catch (error) {
        failed.push({ line: line.line, email: line.email, problems: [problemOf(error)] });
        continue;
      }
      const user: ProvisionedUser = {
        line: line.line,
        email: line.email,
        password: line.password === null ? password : null,
        recoveryToken,
        aliases: [],
      };
      const aliasProblems: string[] = [];
      for (const source of line.aliases) {
        try {
          await admin.aliases.create(actor, { source, owner: line.email });
          user.aliases.push(source);
        } catch (error) {
          aliasProblems.push(`alias ${source}: ${problemOf(error)}`);
        }
      }
      if (aliasProblems.length > 0)
        failed.push({ line: line.line, email: line.email, problems: aliasProblems });
      created.push(user);
      await onCreated(user);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, concurrency) }, worker));
  created.sort((a, b) => a.line - b.line);
  failed.sort((a, b) => a.line - b.line);
  return { created, failed };
}

/** A list to import: CSV text (the console's file, the API's `text/csv`) or JSON values (the API's JSON). */
export type UserImportList = { csv: string } | { json: unknown };

export interface UserImportOptions {
  /** The most users one import takes (the admin API's limit per request); none: any number. */
  maxUsers?: number;
  /** Only check the list: nothing is created. */
  dryRun?: boolean;
  /** Once the list has passed its check, before the first user is made (the console creates its credentials file here). */
  beforeCreating?: () => void | Promise<void>;
  /** Each user as soon as it exists, with its credentials. */
  onCreated?: (user: ProvisionedUser) => void | Promise<void>;
}

interface ImportServices {
  db: Kysely<Database>;
  admin: AdminService;
  passwordPolicy: PasswordPolicy;
}

/** What an import did: refused as a whole (nothing created), or created the users it could. */
export type UserImportOutcome =
  /** More users than `maxUsers`; nothing was checked or created. */
  | { outcome: "too_many"; users: number; max: number }
  /** Lines with problems, every problem of each; nothing was created. */
  | { outcome: "refused"; summary: string; lines: LineProblem[] }
  /** `checked` lines passed; without `dryRun` they were created but for the `failed` ones. */
  | { outcome: "imported"; checked: number; created: ProvisionedUser[]; failed: LineProblem[] };

/**
 * The bulk import, for every surface: parse the list, check every line (nothing is written while
 * any line is bad), then create each user and its aliases as `actor` through the admin services.
 */
export async function importUsers(
  services: ImportServices,
  actor: Actor,
  list: UserImportList,
  options: UserImportOptions & { maxUsers: number },
): Promise<UserImportOutcome>;
/** Without a limit, an import is never refused for its size. */
export async function importUsers(
  services: ImportServices,
  actor: Actor,
  list: UserImportList,
  options?: Omit<UserImportOptions, "maxUsers">,
): Promise<Exclude<UserImportOutcome, { outcome: "too_many" }>>;
export async function importUsers(
  { db, admin, passwordPolicy }: ImportServices,
  actor: Actor,
  list: UserImportList,
  options: UserImportOptions = {},
): Promise<UserImportOutcome> {
  const parsed = "csv" in list ? inputsFromCsv(list.csv) : inputsFromJson(list.json);
  if (options.maxUsers !== undefined && parsed.inputs.length > options.maxUsers)
    return { outcome: "too_many", users: parsed.inputs.length, max: options.maxUsers };
  // A list that could not be read at all (no header, an unclosed quote) has no lines to check.
  const checked =
    parsed.problems.length > 0 && parsed.inputs.length === 0
      ? { lines: [], problems: [] }
      : await checkProvisioning(db, passwordPolicy, parsed.inputs);
  const problems = [...parsed.problems, ...checked.problems].sort((a, b) => a.line - b.line);
  if (problems.length > 0)
    return {
      outcome: "refused",
      summary: `${problems.length} of ${parsed.inputs.length} lines cannot be imported; nothing was created`,
      lines: problems,
    };
  if (options.dryRun) return { outcome: "imported", checked: checked.lines.length, created: [], failed: [] };
  await options.beforeCreating?.();
  const result = await provisionUsers(admin, actor, checked.lines, options.onCreated);
  return { outcome: "imported", checked: checked.lines.length, ...result };
}

/** The credentials file's header and lines: what the operator hands to each user. */
export const credentialsHeader = csvLine(["email", "password", "recoveryToken"]);
export const credentialsLine = (user: ProvisionedUser): string =>
  csvLine([user.email, user.password ?? "", user.recoveryToken ?? ""]);

/** A problem report, one line per problem: `line 3 (bob@example.org): password: ...`. */
export const formatProblems = (problems: LineProblem[]): string[] =>
  problems.flatMap((p) =>
    p.problems.map((problem) => `line ${p.line}${p.email === "" ? "" : ` (${p.email})`}: ${problem}`),
  );

/**
 * The active users as a list `app:users:import` takes back: email, quota, MailCrypt and the
 * aliases they own. No secret: no password, hash, key or token.
 */
export async function* exportUsersCsv(
  db: Kysely<Database>,
  filter: { domain?: string } = {},
): AsyncGenerator<string> {
  yield csvLine(["email", "quota", "mailCrypt", "aliases"]);
  let domainId: number | undefined;
  if (filter.domain !== undefined) {
    const domain = await managedDomain(db, filter.domain.trim());
    if (!domain) throw domainNotFound();
    domainId = domain.id;
  }
  let last = 0;
  for (;;) {
    let query = db
      .selectFrom("users")
      .select(["id", "email", "quota", "mail_crypt"])
      .where(isActiveUser)
      .where("id", ">", last);
    if (domainId !== undefined) query = query.where("domain_id", "=", domainId);
    const users = await query.orderBy("id").limit(1000).execute();
    if (users.length === 0) return;
    const owned = await db
      .selectFrom("aliases")
      .select(["user_id", "source"])
      .where(
        "user_id",
        "in",
        users.map((u) => u.id),
      )
      .where("deleted", "=", 0)
      .orderBy("id")
      .execute();
    const byUser = new Map<number, string[]>();
    for (const alias of owned)
      if (alias.user_id !== null)
        byUser.set(alias.user_id, [...(byUser.get(alias.user_id) ?? []), alias.source]);
    for (const user of users)
      yield csvLine([
        user.email,
        user.quota,
        user.mail_crypt === true || user.mail_crypt === 1,
        (byUser.get(user.id) ?? []).join(" "),
      ]);
    last = users[users.length - 1]!.id;
  }
}
