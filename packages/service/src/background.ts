import { scheduledJobs } from "./jobs/jobs.ts";
import { Scheduler } from "./jobs/scheduler.ts";
import type { Logger } from "./logger.ts";
import { MailWorker, type MailWorkerOptions } from "./mail/sender.ts";
import type { Services } from "./services.ts";
import { DeliveryWorker, type DeliveryWorkerOptions } from "./webhooks/worker.ts";

export interface BackgroundOptions {
  clock?: () => number;
  webhooks?: DeliveryWorkerOptions;
  schedulerCheckIntervalMs?: number;
  /** SMTP_URL: without it there is no e-mail worker. */
  smtpUrl?: string | null;
  mail?: MailWorkerOptions;
}

/** The in-process background work: the webhook delivery worker, the e-mail worker (with SMTP_URL) and the job scheduler. */
export interface Background {
  worker: DeliveryWorker;
  mailWorker: MailWorker | null;
  scheduler: Scheduler;
  start(): void;
  stop(): Promise<void>;
}

export function createBackground(
  services: Services,
  logger: Logger,
  options: BackgroundOptions = {},
): Background {
  const { db } = services.database;
  const { metrics } = services;
  const worker = new DeliveryWorker(db, logger.child({ component: "webhooks" }), {
    clock: options.clock,
    ...options.webhooks,
    onAttempt: (outcome) => {
      const result = outcome.success ? "success" : outcome.final ? "failed" : "retry";
      metrics.webhookDeliveries.inc({ event: outcome.type, result });
      metrics.webhookDuration.observe({ event: outcome.type }, outcome.durationSeconds);
      options.webhooks?.onAttempt?.(outcome);
    },
  });
  const jobs = scheduledJobs({
    db,
    logger: logger.child({ component: "jobs" }),
    settings: services.settings,
    lifecycle: services.lifecycle,
    webhooks: services.webhooks,
    clock: options.clock,
  });
  const scheduler = new Scheduler(db, logger.child({ component: "scheduler" }), jobs, {
    clock: options.clock,
    checkIntervalMs: options.schedulerCheckIntervalMs,
  });
  const mailWorker = options.smtpUrl
    ? new MailWorker(db, logger.child({ component: "mail" }), options.smtpUrl, {
        clock: options.clock,
        ...options.mail,
      })
    : null;
  return {
    worker,
    mailWorker,
    scheduler,
    start() {
      worker.start();
      mailWorker?.start();
      scheduler.start();
    },
    async stop() {
      await Promise.all([worker.stop(), mailWorker?.stop(), scheduler.stop()]);
    },
  };
}
