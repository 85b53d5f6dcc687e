import type {
  SecurityEventDoor,
  SecurityEventRecord,
  SecurityEventResult,
  SecurityEventType,
} from "../accounts/security-events.ts";
import type { MessageKey, Translate } from "../i18n/catalogue.ts";

/** The catalogue's words for every event type, door and result (a new one does not compile without its text). */
const typeKeys: Record<SecurityEventType, MessageKey> = {
  "sign_in.succeeded": "activity.type.sign_in.succeeded",
  "sign_in.failed": "activity.type.sign_in.failed",
  "sign_in.throttled": "activity.type.sign_in.throttled",
  "second_factor.failed": "activity.type.second_factor.failed",
  "guessing.ceiling_reached": "activity.type.guessing.ceiling_reached",
  "password.changed": "activity.type.password.changed",
  "recovery.started": "activity.type.recovery.started",
  "recovery.completed": "activity.type.recovery.completed",
  "recovery.stopped": "activity.type.recovery.stopped",
  "recovery_token.renewed": "activity.type.recovery_token.renewed",
  "two_factor.enabled": "activity.type.two_factor.enabled",
  "two_factor.disabled": "activity.type.two_factor.disabled",
  "sessions.ended": "activity.type.sessions.ended",
  "app_password.created": "activity.type.app_password.created",
  "app_password.removed": "activity.type.app_password.removed",
  "app_passwords.required_changed": "activity.type.app_passwords.required_changed",
  "passkey.added": "activity.type.passkey.added",
  "passkey.removed": "activity.type.passkey.removed",
  "passkey.cloned": "activity.type.passkey.cloned",
  "account.deleted": "activity.type.account.deleted",
  "account.restored": "activity.type.account.restored",
};

const doorKeys: Record<SecurityEventDoor, MessageKey> = {
  web: "activity.door.web",
  passdb: "activity.door.passdb",
  mta_auth: "activity.door.mta_auth",
  webmail: "activity.door.webmail",
  identity: "activity.door.identity",
  console: "activity.door.console",
  admin_api: "activity.door.admin_api",
  job: "activity.door.job",
};

const resultKeys: Record<SecurityEventResult, MessageKey> = {
  succeeded: "activity.result.succeeded",
  failed: "activity.result.failed",
  throttled: "activity.result.throttled",
  changed: "activity.result.changed",
};

export const eventTypeText = (t: Translate, type: SecurityEventType): string =>
  typeKeys[type] ? t(typeKeys[type]) : type;
export const doorText = (t: Translate, door: SecurityEventDoor): string =>
  doorKeys[door] ? t(doorKeys[door]) : door;
export const resultText = (t: Translate, result: SecurityEventResult): string => t(resultKeys[result]);

/** Failures that need saying why, so a user whose mail app stopped working can tell. */
const failureKeys: Partial<Record<string, MessageKey>> = {
  app_password_required: "activity.reason.app_password_required",
  app_password_scope: "activity.reason.app_password_scope",
};

/** What happened, with the reason of a failed sign-in where the reason is app passwords' rule. */
export function eventWhatText(t: Translate, event: Pick<SecurityEventRecord, "type" | "detail">): string {
  const reason = event.type === "sign_in.failed" ? event.detail?.reason : undefined;
  const key = typeof reason === "string" ? failureKeys[reason] : undefined;
  return key ? t(key) : eventTypeText(t, event.type);
}

/**
 * One event as its owner reads it: what, where, from which address, the result. A change an
 * administrator made says so, without the administrator's name or address.
 */
export function ownerRow(t: Translate, event: SecurityEventRecord) {
  const door = doorText(t, event.door);
  return {
    at: event.at,
    what: eventWhatText(t, event),
    door: event.actor === null ? door : t("activity.byAdmin", { door }),
    clientAddress: event.actor === null ? (event.clientAddress ?? "") : "",
    result: resultText(t, event.result),
    failed: event.result === "failed" || event.result === "throttled",
  };
}
