import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import {
  normalizeSetting,
  type SettingName,
  type Settings,
  settingDefinitions,
} from "../../../accounts/settings.ts";
import { ServiceError } from "../../../errors.ts";
import type { MessageKey, Translate } from "../../../i18n/catalogue.ts";
import { addFlash, type FieldErrors, seeOther, type WebServices } from "../../context.ts";
import { refusalText } from "../../refusals.ts";
import { actorOf, adminArea, adminPage, type Form, text } from "./common.ts";

interface Definition {
  type: string;
  default: string | number | boolean;
  optional?: boolean;
  min?: number;
  max?: number;
  minLength?: number;
  maxLength?: number;
  choices?: readonly (string | number)[];
  description: string;
}

const definitions = settingDefinitions as Record<SettingName, Definition>;
const names = Object.keys(settingDefinitions) as SettingName[];

/** A catalogue text, or the fallback when the catalogue has none (a setting added later). */
const textOr = (t: Translate, key: string, fallback: string): string =>
  (t(key as MessageKey) as string | undefined) ?? fallback;

/** The field of one setting: its input kind, label and description in the visitor's language. */
function fields(t: Translate) {
  return names.map((name) => {
    const definition = definitions[name];
    const input =
      definition.type === "boolean"
        ? "checkbox"
        : definition.choices
          ? "select"
          : definition.type === "text"
            ? "textarea"
            : definition.type === "email"
              ? "email"
              : definition.type === "url"
                ? "url"
                : "text";
    return {
      name,
      input,
      label: textOr(t, `admin.setting.${name}`, name),
      hint: textOr(t, `admin.setting.${name}.hint`, definition.description),
      choices: definition.choices?.map(String) ?? [],
      numeric: definition.type === "integer",
    };
  });
}

/**
 * `/admin/settings` (admins only): one form for the whole catalogue (accounts/settings.ts), each
 * setting with its description. Every value is checked by the settings' own rule (the admin API's),
 * all refusals shown at once; then all are written together or none.
 */
export async function adminSettingsPages(app: FastifyInstance, services: WebServices) {
  const { admin } = services;

  const page = async (
    request: FastifyRequest,
    reply: FastifyReply,
    values: Record<string, unknown> | null,
    errors: FieldErrors = {},
    status = 200,
  ) => {
    const current: Settings | Record<string, unknown> =
      values ?? (await admin.settings.all(actorOf(request)));
    return adminPage(
      request,
      reply,
      "admin/settings",
      { fields: fields(request.web.t), values: current, errors },
      status,
    );
  };

  app.get("/admin/settings", { preHandler: adminArea }, async (request, reply) => page(request, reply, null));

  app.post<{ Body: Form }>(
    "/admin/settings",
    { preHandler: [app.csrfProtection, adminArea] },
    async (request, reply) => {
      const actor = actorOf(request);
      await admin.settings.all(actor);
      const body = request.body ?? {};
      const values: Record<string, string | boolean> = {};
      for (const name of names)
        values[name] = definitions[name].type === "boolean" ? text(body[name]) === "yes" : text(body[name]);
      const errors: FieldErrors = {};
      for (const name of names) {
        try {
          normalizeSetting(name, values[name]);
        } catch (error) {
          if (!(error instanceof ServiceError)) throw error;
          errors[name] = refusalText(error);
        }
      }
      if (Object.keys(errors).length > 0) return page(request, reply, values, errors, 422);
      await admin.settings.update(actor, values);
      await addFlash(request, { kind: "success", key: "admin.settings.saved" });
      return seeOther(reply, "/admin/settings");
    },
  );
}
