import type { FastifyInstance } from "fastify";
import type { SettingsService } from "../../accounts/settings.ts";
import { body } from "./input.ts";

export async function settingsRoutes(app: FastifyInstance, { settings }: { settings: SettingsService }) {
  app.get("/api/admin/settings", async () => settings.all());
  app.patch("/api/admin/settings", async (request) => settings.update(body(request.body)));
}
