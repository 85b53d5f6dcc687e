import { refusal } from "../errors.ts";
import { effectiveRoles, knownRoles, type Role } from "./roles.ts";

/** The actor may not do this: a domain admin outside its domain, or on an admin. */
export const notPermitted = refusal<{ actor: string; subject: string }>(
  "admin.not_permitted",
  "forbidden",
  ({ actor, subject }) => `${actor} may not manage this ${subject}`,
);
export const roleNotAssignable = refusal<{ role: string }>(
  "admin.role_not_assignable",
  "invalid",
  ({ role }) => `roles: not allowed to assign the role ${role}`,
);

/**
 * Who may do what in administration: the one place the rule lives. Every admin action (the web
 * pages, the admin API, the console) names its actor and asks `assertMay` before it touches
 * anything, so the three surfaces give the same answer (reference sections 5.1, 5.2 and 5.8).
 */

/** Who performs an admin action. */
export interface Actor {
  /** The audit log's name for it: a user's address, `console` or `api-token:<name>`. */
  name: string;
  /** `all`: an admin, the console or an admin API token; `domain`: a domain admin, `domainId` only. */
  reach: "all" | "domain";
  /** The actor's own domain (a person's); null for the console and API tokens. */
  domainId: number | null;
  /** The signed-in user, when the actor is one. */
  userId: number | null;
  /** Where the request came from; null for the console. */
  clientAddress: string | null;
}

export const consoleActor: Actor = {
  name: "console",
  reach: "all",
  domainId: null,
  userId: null,
  clientAddress: null,
};

/** An admin API request: the token's scope `admin` grants everything. */
export const apiTokenActor = (tokenName: string, clientAddress: string | null): Actor => ({
  name: `api-token:${tokenName}`,
  reach: "all",
  domainId: null,
  userId: null,
  clientAddress,
});

/**
 * The actor of a signed-in user: ROLE_ADMIN reaches everything, ROLE_DOMAIN_ADMIN its own domain
 * (the hierarchy decides, as for page access); anyone else is no actor at all (null).
 */
export function userActor(
  user: { id: number; email: string; domainId: number; roles: readonly Role[] },
  clientAddress: string | null,
): Actor | null {
  const roles = effectiveRoles(user.roles);
  if (!roles.has("ROLE_DOMAIN_ADMIN")) return null;
  return {
    name: user.email,
    reach: roles.has("ROLE_ADMIN") ? "all" : "domain",
    domainId: user.domainId,
    userId: user.id,
    clientAddress,
  };
}

/** Areas that only actors reaching everything may see: the whole installation, not one domain. */
export const globalAreas = [
  "domains",
  "settings",
  "api-tokens",
  "webhooks",
  "reserved-names",
  "maintenance",
] as const;
export type GlobalArea = (typeof globalAreas)[number];

/** The user an address belongs to (the user of that address, or an alias's owner): its domain and stored roles. */
export interface AddressHolder {
  domainId: number;
  roles: readonly Role[];
}

/** What an actor wants to see or change. */
export type Subject =
  /** A user: its domain and its stored roles (a domain admin never reaches a holder of ROLE_ADMIN). */
  | { kind: "user"; domainId: number; roles: readonly Role[] }
  /** An alias; to change or delete one, its owner too (null: no owner), who must be in reach. */
  | { kind: "alias"; domainId: number; owner?: AddressHolder | null }
  | { kind: "invite-code"; domainId: number }
  /** The key of an address; to publish or remove one, the address's holder too, who must be in reach. */
  | { kind: "openpgp-key"; domainId: number; holder?: AddressHolder | null }
  /** One domain's page and its invitation settings (creating and deleting domains is the area `domains`). */
  | { kind: "domain"; domainId: number }
  | { kind: "area"; area: GlobalArea };

/** The one decision: may this actor see or change this subject? */
export function may(actor: Actor, subject: Subject): boolean {
  if (actor.reach === "all") return true;
  switch (subject.kind) {
    case "area":
      return false;
    case "user":
      // The raw stored role, as the reference checks it: an admin account is out of reach.
      return subject.domainId === actor.domainId && !subject.roles.includes("ROLE_ADMIN");
    case "alias":
    case "openpgp-key": {
      // What belongs to a user the actor may not manage (an admin's key or alias in the actor's
      // domain) is out of reach with that user.
      const holder = subject.kind === "alias" ? subject.owner : subject.holder;
      return (
        subject.domainId === actor.domainId &&
        (holder == null || may(actor, { kind: "user", domainId: holder.domainId, roles: holder.roles }))
      );
    }
    default:
      return subject.domainId === actor.domainId;
  }
}

export function assertMay(actor: Actor, subject: Subject): void {
  if (!may(actor, subject)) throw notPermitted({ actor: actor.name, subject: subjectName(subject) });
}

const subjectName = (subject: Subject): string => (subject.kind === "area" ? subject.area : subject.kind);

/** The domain every list of this actor is confined to; null: all domains. */
export const domainScope = (actor: Actor): number | null => (actor.reach === "all" ? null : actor.domainId);

/** Roles a domain admin may give or take (reference 5.1: the admin user form's own table). */
const domainAdminAssignable: readonly Role[] = ["ROLE_USER", "ROLE_PERMANENT", "ROLE_DOMAIN_ADMIN"];

/** The roles this actor may give or take away, in catalogue order. */
export function assignableRoles(actor: Actor): Role[] {
  return actor.reach === "all"
    ? [...knownRoles]
    : knownRoles.filter((role) => domainAdminAssignable.includes(role));
}

/**
 * A change of roles from `before` to `after`: every role added or removed must be one the actor
 * may assign. Roles it may not assign stay as they are (a domain admin editing a user marked
 * ROLE_SPAM keeps the mark, it cannot lift it).
 */
export function assertRoleChange(actor: Actor, before: readonly Role[], after: readonly Role[]): void {
  const allowed = assignableRoles(actor);
  const changed = [
    ...after.filter((role) => !before.includes(role)),
    ...before.filter((role) => !after.includes(role)),
  ];
  const refused = changed.find((role) => !allowed.includes(role));
  // A form's validation error (422), as the reference answers it, not a 403: the page is allowed.
  if (refused) throw roleNotAssignable({ role: refused });
}
