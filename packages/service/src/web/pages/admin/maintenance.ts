import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { dryRunJob, type JobOutcome } from "../../../admin/maintenance.ts";
import type { MessageKey, Translate } from "../../../i18n/catalogue.ts";
import type { Logger } from "../../../logger.ts";
import type { WebServices } from "../../context.ts";
import { actorOf, adminArea, adminPage, type Form, param, text } from "./common.ts";

/** A job's description from the catalogue, or its name for a job added later. */
const describe = (t: Translate, name: string): string =>
  (t(`admin.job.${name}` as MessageKey) as string | undefined) ?? name;

/**
 * `/admin/maintenance` (admins only): the scheduled jobs with their last runs; run one now and see
 * its result. The inactive-user removal is offered as a dry run first, listing who would go.
 */
export async function adminMaintenancePages(app: FastifyInstance, services: WebServices) {
  const { admin } = services;
  const logger = app.log as unknown as Logger;

  const page = async (request: FastifyRequest, reply: FastifyReply, outcome: JobOutcome | null = null) => {
    const jobs = await admin.maintenance.jobs(actorOf(request), logger);
    return adminPage(request, reply, "admin/maintenance", {
      jobs: jobs.map((job) => ({ ...job, description: describe(request.web.t, job.name) })),
      outcome,
      dryRunJob,
    });
  };

  app.get("/admin/maintenance", { preHandler: adminArea }, (request, reply) => page(request, reply));

  app.post<{ Body: Form }>(
    "/admin/maintenance/:job/run",
    { preHandler: [app.csrfProtection, adminArea] },
    async (request, reply) => {
      const outcome = await admin.maintenance.run(actorOf(request), param(request, "job"), {
        dryRun: text(request.body?.dryRun) === "yes",
        logger,
      });
      // The result is this answer (a job's result is no flash for later).
      return page(request, reply, outcome);
    },
  );
}
