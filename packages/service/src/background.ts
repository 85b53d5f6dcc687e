import { scheduledJobs } from "./jobs/jobs.ts";
import { Scheduler } from "./jobs/scheduler.ts";
import type { Logger } from "./logger.ts";
import type { Services } from "./services.ts";
import { DeliveryWorker, type DeliveryWorkerOptions } from "./webhooks/worker.ts";

export interface BackgroundOptions {
  clock?: () => number;
  webhooks?: DeliveryWorkerOptions;
  schedulerCheckIntervalMs?: number;
}

/** The in-process background work: the webhook delivery worker and the job scheduler. */
export interface Background {
  worker: DeliveryWorker;
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
  return {
    worker,
    scheduler,
    start() {
      worker.start();
      scheduler.start();
    },
    async stop() {
      await Promise.all([worker.stop(), scheduler.stop()]);
    },
  };
}
