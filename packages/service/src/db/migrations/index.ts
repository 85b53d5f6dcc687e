import { initial } from "./0001-initial.ts";
import { webhooksAndJobs } from "./0002-webhooks-and-jobs.ts";
import { inactivityPeriods } from "./0003-inactivity-periods.ts";
import { people } from "./0004-people.ts";
import { admin } from "./0005-admin.ts";
import { signInGuard } from "./0006-sign-in-guard.ts";
import { securityEvents } from "./0007-security-events.ts";
import { appPasswordsAndPasskeys } from "./0008-app-passwords-and-passkeys.ts";
import { passkeyChallenges } from "./0009-passkey-challenges.ts";
import { secretBoxBinding } from "./0010-secret-box-binding.ts";
import { usersPageAtScale } from "./0011-users-page-at-scale.ts";
import { roleFilterAtScale } from "./0012-role-filter-at-scale.ts";
import type { VersionedMigration } from "./types.ts";

/** Applied in key order; a released migration is never edited, only followed by a new one. */
export const migrations: Record<string, VersionedMigration> = {
  "0001-initial": initial,
  "0002-webhooks-and-jobs": webhooksAndJobs,
  "0003-inactivity-periods": inactivityPeriods,
  "0004-people": people,
  "0005-admin": admin,
  "0006-sign-in-guard": signInGuard,
  "0007-security-events": securityEvents,
  "0008-app-passwords-and-passkeys": appPasswordsAndPasskeys,
  "0009-passkey-challenges": passkeyChallenges,
  "0010-secret-box-binding": secretBoxBinding,
  "0011-users-page-at-scale": usersPageAtScale,
  "0012-role-filter-at-scale": roleFilterAtScale,
};
