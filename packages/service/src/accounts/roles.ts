/** Roles as the reference stores them, and the hierarchy between them (section 5.1). */
export const knownRoles = [
  "ROLE_USER",
  "ROLE_SUSPICIOUS",
  "ROLE_SPAM",
  "ROLE_MULTIPLIER",
  "ROLE_PERMANENT",
  "ROLE_DOMAIN_ADMIN",
  "ROLE_ADMIN",
] as const;
export type Role = (typeof knownRoles)[number];

const implied: Record<Role, Role[]> = {
  ROLE_USER: [],
  ROLE_SUSPICIOUS: [],
  ROLE_SPAM: ["ROLE_SUSPICIOUS"],
  ROLE_MULTIPLIER: [],
  ROLE_PERMANENT: [],
  ROLE_DOMAIN_ADMIN: ["ROLE_USER"],
  ROLE_ADMIN: ["ROLE_DOMAIN_ADMIN", "ROLE_USER"],
};

export const isRole = (value: string): value is Role => (knownRoles as readonly string[]).includes(value);

/** Stored roles always include ROLE_USER, once each, in catalogue order. */
export function normalizeRoles(roles: readonly string[]): Role[] {
  const set = new Set<string>(["ROLE_USER", ...roles]);
  return knownRoles.filter((role) => set.has(role));
}

export function parseStoredRoles(json: string): Role[] {
  try {
    const parsed: unknown = JSON.parse(json);
    return normalizeRoles(
      Array.isArray(parsed) ? parsed.filter((r): r is string => typeof r === "string") : [],
    );
  } catch {
    return ["ROLE_USER"];
  }
}

/** Stored roles plus every role they imply: the rules use this, never the raw list. */
export function effectiveRoles(roles: readonly Role[]): Set<Role> {
  const result = new Set<Role>();
  const visit = (role: Role) => {
    if (result.has(role)) return;
    result.add(role);
    for (const next of implied[role]) visit(next);
  };
  for (const role of roles) visit(role);
  return result;
}

/** Users the inactivity job never deletes. */
export const isExemptFromInactivityDeletion = (roles: readonly Role[]): boolean => {
  const effective = effectiveRoles(roles);
  return effective.has("ROLE_DOMAIN_ADMIN") || effective.has("ROLE_PERMANENT");
};
