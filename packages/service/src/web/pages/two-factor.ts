import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import QRCode from "qrcode";
import { ownerOrigin } from "../../accounts/security-events.ts";
import { totpCodeWrong } from "../../accounts/two-factor.ts";
import { addFlash, type FieldErrors, seeOther, type WebServices } from "../context.ts";
import { signedIn } from "../guards.ts";
import { confirmPassword } from "../password-confirmation.ts";
import { refusalOnField } from "../refusals.ts";
import { render } from "../render.ts";

type Form = Record<string, string | undefined>;
const text = (value: unknown): string => (typeof value === "string" ? value : "");
/** Where the offered, not yet confirmed secret waits between the steps (the session row, never a URL). */
const pendingKey = "totpPending";
const backupCodeList = /^\d{6}( \d{6}){0,19}$/;

/** `/account/twofactor`: enrolment (password, QR code, a code to confirm, backup codes) and switching off. */
export async function twoFactorPages(app: FastifyInstance, services: WebServices) {
  const { twoFactor, sessions } = services;
  const guarded = { preHandler: signedIn };
  const posted = { preHandler: [app.csrfProtection, signedIn] };
  const session = (request: FastifyRequest) => request.web.session!;

  const overview = async (
    request: FastifyRequest,
    reply: FastifyReply,
    errors: FieldErrors = {},
    status = 200,
  ) =>
    render(
      request,
      reply,
      "account/twofactor",
      {
        errors,
        enabled: session(request).user.totpConfirmed && session(request).user.totpSecret !== null,
        passkeys: (await services.passkeys.list(session(request).user)).length,
      },
      status,
    );

  const scanPage = async (
    request: FastifyRequest,
    reply: FastifyReply,
    secret: string,
    errors: FieldErrors = {},
    status = 200,
    requireAppPasswords = true,
  ) => {
    const uri = await twoFactor.provisioningUri(session(request).user.email, secret);
    // Rendered here, as SVG in a data: URI (the CSP allows img-src data:): no script, nothing fetched.
    const svg = await QRCode.toString(uri, { type: "svg", errorCorrectionLevel: "M", margin: 2 });
    return render(
      request,
      reply,
      "account/twofactor-confirm",
      {
        errors,
        uri,
        secretGroups: secret.match(/.{1,4}/g)?.join(" ") ?? secret,
        qr: `data:image/svg+xml;base64,${Buffer.from(svg).toString("base64")}`,
        // "Mail apps must use app passwords", offered checked: the second factor guards IMAP and SMTP only so.
        requireAppPasswords,
      },
      status,
    );
  };

  const isEnabled = (request: FastifyRequest) => {
    const { user } = session(request);
    return user.totpConfirmed && user.totpSecret !== null;
  };

  app.get("/account/twofactor", guarded, (request, reply) => overview(request, reply));

  app.post<{ Body: Form }>("/account/twofactor/enable", posted, async (request, reply) => {
    if (isEnabled(request)) {
      await addFlash(request, { kind: "info", key: "totpSetup.alreadyOn" });
      return seeOther(reply, "/account/twofactor");
    }
    const confirmed = await confirmPassword(request, reply, services, text(request.body?.password));
    if ("errors" in confirmed) return overview(request, reply, confirmed.errors, confirmed.status);
    const current = session(request);
    current.data[pendingKey] = twoFactor.offer();
    await sessions.save(current);
    return seeOther(reply, "/account/twofactor/confirm");
  });

  app.get("/account/twofactor/confirm", guarded, async (request, reply) => {
    const pending = session(request).data[pendingKey];
    if (isEnabled(request)) return seeOther(reply, "/account/twofactor");
    if (!twoFactor.isCurrent(pending)) {
      if (pending !== undefined) await addFlash(request, { kind: "error", key: "totpSetup.expired" });
      return seeOther(reply, "/account/twofactor");
    }
    return scanPage(request, reply, pending.secret);
  });

  app.post<{ Body: Form }>("/account/twofactor/confirm", posted, async (request, reply) => {
    const current = session(request);
    const pending = current.data[pendingKey];
    if (isEnabled(request)) return seeOther(reply, "/account/twofactor");
    if (!twoFactor.isCurrent(pending)) {
      await addFlash(request, { kind: "error", key: "totpSetup.expired" });
      return seeOther(reply, "/account/twofactor");
    }
    const code = text(request.body?.code).replace(/\s+/g, "");
    const requireAppPasswords = request.body?.appPasswordsRequired === "yes";
    if (code === "")
      return scanPage(
        request,
        reply,
        pending.secret,
        { code: { key: "form.required" } },
        422,
        requireAppPasswords,
      );
    let backupCodes: string[];
    try {
      backupCodes = await twoFactor.confirm(current.user, pending, code, ownerOrigin("web", request.ip), {
        keepSessionIdHash: current.idHash,
      });
    } catch (error) {
      const refused = refusalOnField(reply, error, [[totpCodeWrong, "code"]]);
      if (refused)
        return scanPage(request, reply, pending.secret, refused.errors, refused.status, requireAppPasswords);
      throw error;
    }
    if (requireAppPasswords)
      await services.appPasswords.setRequired(current.user, true, ownerOrigin("web", request.ip));
    delete current.data[pendingKey];
    await sessions.save(current);
    // Shown in this answer only (and posted back with the acknowledgement): never stored in clear.
    return render(request, reply, "account/twofactor-backup-codes", { codes: backupCodes });
  });

  app.post<{ Body: Form }>("/account/twofactor/backup-codes", posted, async (request, reply) => {
    if (request.body?.ack !== "yes") {
      const given = text(request.body?.codes);
      const codes = backupCodeList.test(given) ? given.split(" ") : [];
      const errors: FieldErrors = { ack: { key: "totpSetup.ackMissing" } };
      return render(request, reply, "account/twofactor-backup-codes", { codes, errors }, 422);
    }
    await addFlash(request, { kind: "success", key: "totpSetup.enabled" });
    return seeOther(reply, "/account/twofactor");
  });

  app.post<{ Body: Form }>("/account/twofactor/disable", posted, async (request, reply) => {
    if (!isEnabled(request)) return seeOther(reply, "/account/twofactor");
    const confirmed = await confirmPassword(request, reply, services, text(request.body?.password));
    if ("errors" in confirmed) return overview(request, reply, confirmed.errors, confirmed.status);
    await twoFactor.disable(session(request).user, ownerOrigin("web", request.ip));
    await addFlash(request, { kind: "success", key: "totpSetup.disabled" });
    return seeOther(reply, "/account/twofactor");
  });
}
