import type { FastifyInstance } from "fastify";
import type { WeekFigures } from "../../../admin/dashboard.ts";
import type { WebServices } from "../../context.ts";
import { actorOf, adminArea, adminPage } from "./common.ts";

/** The chart's drawing area, in SVG units (the SVG scales to its container). */
const width = 720;
const height = 260;
const margin = { top: 16, right: 56, bottom: 40, left: 56 };

/**
 * The geometry of the 12-week chart, worked out here so the template only writes elements:
 * sign-ups as bars on the left scale, active accounts as a line on the right scale. No script runs
 * in the browser; the numbers are also in a table for readers who do not see the chart.
 */
export function chartGeometry(weeks: WeekFigures[]) {
  const plotWidth = width - margin.left - margin.right;
  const plotHeight = height - margin.top - margin.bottom;
  const maxSignUps = Math.max(1, ...weeks.map((w) => w.signUps));
  const maxActive = Math.max(1, ...weeks.map((w) => w.activeAccounts));
  const step = plotWidth / Math.max(1, weeks.length);
  const barWidth = step * 0.6;
  const bars = weeks.map((week, i) => {
    const h = (week.signUps / maxSignUps) * plotHeight;
    return {
      x: round(margin.left + i * step + (step - barWidth) / 2),
      y: round(margin.top + plotHeight - h),
      width: round(barWidth),
      height: round(h),
      value: week.signUps,
    };
  });
  const points = weeks.map((week, i) => ({
    x: round(margin.left + i * step + step / 2),
    y: round(margin.top + plotHeight - (week.activeAccounts / maxActive) * plotHeight),
    value: week.activeAccounts,
  }));
  const labels = weeks.map((week, i) => ({
    x: round(margin.left + i * step + step / 2),
    y: height - margin.bottom + 16,
    text: new Date(week.start * 1000).toISOString().slice(5, 10),
  }));
  return {
    width,
    height,
    plot: {
      left: margin.left,
      right: width - margin.right,
      top: margin.top,
      bottom: margin.top + plotHeight,
    },
    maxSignUps,
    maxActive,
    bars,
    line: points.map((p) => `${p.x},${p.y}`).join(" "),
    points,
    labels,
  };
}

const round = (n: number) => Math.round(n * 10) / 10;

/** `/admin`: the figures of the reference, the webhook backlog and the 12-week chart. */
export async function adminDashboardPages(app: FastifyInstance, services: WebServices) {
  const { admin } = services;
  app.get("/admin", { preHandler: adminArea }, async (request, reply) => {
    const actor = actorOf(request);
    const figures = await admin.dashboard.figures(actor);
    const domain = actor.reach === "all" ? null : ((await admin.domains.choices(actor))[0]?.name ?? "");
    return adminPage(request, reply, "admin/dashboard", {
      figures,
      domain,
      chart: chartGeometry(figures.weeks),
      weekLabel: (start: number) => new Date(start * 1000).toISOString().slice(0, 10),
    });
  });
  app.get("/admin/", { preHandler: adminArea }, async (_request, reply) =>
    reply.code(301).redirect("/admin"),
  );
}
