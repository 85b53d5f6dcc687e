import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance } from "fastify";
import { type TBoolean, type TInteger, type TString, Type } from "typebox";
import { type SettingName, type SettingsService, settingDefinitions } from "../../accounts/settings.ts";
import type { AdminService } from "../../admin/service.ts";
import { actorOf } from "./actor.ts";
import { adminErrors, adminRoute } from "./input.ts";

const tag = "admin: settings";

type SettingSchema = TInteger | TBoolean | TString;

/** Each setting's JSON type, from the catalogue, in its order (the order `SettingsService.all` gives). */
function settingSchemas(): Record<SettingName, SettingSchema> {
  const schemas = {} as Record<SettingName, SettingSchema>;
  for (const [name, definition] of Object.entries(settingDefinitions) as [
    SettingName,
    (typeof settingDefinitions)[SettingName],
  ][]) {
    const options = { description: definition.description, examples: [definition.default] };
    schemas[name] =
      definition.type === "integer"
        ? Type.Integer(options)
        : definition.type === "boolean"
          ? Type.Boolean(options)
          : Type.String(options);
  }
  return schemas;
}

const schemas = settingSchemas();
const defaults = Object.fromEntries(
  Object.entries(settingDefinitions).map(([name, definition]) => [name, definition.default]),
);

const AllSettings = Type.Object(schemas, {
  description: "Every setting with its value",
  examples: [{ ...defaults, app_name: "Example Mail", webmail_url: "https://webmail.example.org" }],
});

/**
 * Any of the settings, each of its own JSON type (a whole number, true/false or a string). The
 * service checks the values and refuses unknown names, so the whole patch is written or none of it.
 */
const SettingsPatch = Type.Partial(Type.Object(schemas), {
  examples: [{ smtp_quota_limit_per_hour: 50, abuse_address: "abuse-desk@example.org" }],
});

export async function settingsRoutes(
  scope: FastifyInstance,
  { settings, admin }: { settings: SettingsService; admin: AdminService },
) {
  const app = scope.withTypeProvider<TypeBoxTypeProvider>();
  app.get(
    "/api/admin/settings",
    {
      schema: {
        ...adminRoute(tag, "Every setting with its value"),
        response: { 200: AllSettings, ...adminErrors({}) },
      },
    },
    async () => settings.all(),
  );
  app.patch(
    "/api/admin/settings",
    {
      schema: {
        ...adminRoute(
          tag,
          "Change settings",
          "Every value is checked first; then all are written in one transaction, or none.",
        ),
        body: SettingsPatch,
        response: {
          200: AllSettings,
          ...adminErrors(
            {
              422: [
                "mta_sts_mode: must be one of none, testing, enforce",
                "unknown setting: nope",
                "smtp_quota_limit_per_hour: must be a whole number",
                "inactive_user_days: must be at least 30",
              ],
            },
            { body: true },
          ),
        },
      },
    },
    async (request) => admin.settings.update(actorOf(request), request.body),
  );
}
