import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { formatDateTime } from "../../i18n/dates.ts";
import { notOwnIdentity } from "../../openpgp/identities.ts";
import {
  keyNoData,
  keyNoneForAddress,
  keySeveralForAddress,
  keyTooLarge,
  maxKeyUploadBodyBytes,
} from "../../openpgp/keys.ts";
import { addFlash, type FieldErrors, seeOther, type WebServices } from "../context.ts";
import { notSpam } from "../guards.ts";
import { confirmPassword } from "../password-confirmation.ts";
import { refusalOnField } from "../refusals.ts";
import { errorPage, render } from "../render.ts";
import { acceptUploads, uploadOf } from "../uploads.ts";

type Form = Record<string, string | undefined>;
const text = (value: unknown): string => (typeof value === "string" ? value : "");

/** The upload form as the page reads it, whether it came as multipart (with a file) or as a plain form. */
interface UploadForm {
  email: string;
  keyText: string;
  /** The chosen file; null when none was chosen (browsers send an empty part without a name). */
  keyFile: { data: Buffer; truncated: boolean } | null;
  /** A field cut at the size limit. */
  truncated: boolean;
}

/** `/account/openpgp`: the user's keys for WKD; upload (file or pasted text) and deletion (password). */
export async function openPgpPages(app: FastifyInstance, services: WebServices) {
  const { openPgpIdentities } = services;
  const guarded = { preHandler: notSpam };
  const posted = { preHandler: [app.csrfProtection, notSpam] };
  const me = (request: FastifyRequest) => request.web.session!.user;

  const page = async (
    request: FastifyRequest,
    reply: FastifyReply,
    form: { errors?: FieldErrors; values?: Record<string, string> } = {},
    status = 200,
  ) => {
    const identities = await openPgpIdentities.list(me(request));
    return render(
      request,
      reply,
      "account/openpgp",
      {
        identities,
        when: (seconds: number) => formatDateTime(request.web.locale, seconds),
        errors: form.errors ?? {},
        values: form.values ?? {},
      },
      status,
    );
  };

  app.get("/account/openpgp", guarded, (request, reply) => page(request, reply));

  // The upload reads multipart bodies: the parser is registered in a scope of its own, so no
  // other page accepts them. Files are held in memory up to the importer's own limit.
  await app.register(async (scope) => {
    await acceptUploads(scope, maxKeyUploadBodyBytes);

    scope.post<{ Body: Form }>("/account/openpgp", posted, async (request, reply) => {
      const upload = uploadOf(request);
      const form: UploadForm = {
        email: text(request.body?.email),
        keyText: text(request.body?.keyText),
        keyFile: upload?.file?.field === "keyFile" ? upload.file : null,
        truncated: upload?.truncated ?? false,
      };
      const values = { email: form.email, keyText: form.keyText };
      const hasText = form.keyText.trim() !== "";
      const hasFile = form.keyFile !== null && form.keyFile.data.length > 0;
      const field = hasFile ? "keyFile" : "keyText";
      if (hasText === hasFile)
        return page(request, reply, { errors: { keyFile: { key: "openpgp.selectOne" } }, values }, 422);
      if (form.truncated || form.keyFile?.truncated)
        return page(request, reply, { errors: { [field]: { key: "openpgp.tooLarge" } }, values }, 413);
      try {
        await openPgpIdentities.upload(me(request), form.email, hasFile ? form.keyFile!.data : form.keyText);
      } catch (error) {
        const refused = refusalOnField(reply, error, [
          [notOwnIdentity, "email"],
          [keyNoData, field],
          [keyTooLarge, field, 413],
          [keyNoneForAddress, field],
          [keySeveralForAddress, field],
        ]);
        if (!refused) throw error;
        return page(request, reply, { errors: refused.errors, values }, refused.status);
      }
      await addFlash(request, { kind: "success", key: "openpgp.uploaded" });
      return seeOther(reply, "/account/openpgp");
    });
  });

  const deletePage = (
    request: FastifyRequest,
    reply: FastifyReply,
    email: string,
    errors: FieldErrors = {},
    status = 200,
  ) => render(request, reply, "account/openpgp-delete", { email, errors }, status);

  /** The address of a delete URL when it is one of the user's identities with a key, else an error page. */
  const keyOf = async (request: FastifyRequest, reply: FastifyReply, email: string) => {
    const identity = (await openPgpIdentities.list(me(request))).find((i) => i.email === email);
    if (!identity) return errorPage(request, reply, 403, request.web.t("openpgp.notIdentity"));
    if (!identity.key) return errorPage(request, reply, 404, request.web.t("openpgp.noStoredKey"));
    return null;
  };

  app.get<{ Params: { email: string } }>(
    "/account/openpgp/delete/:email",
    guarded,
    async (request, reply) => {
      const { email } = request.params;
      return (await keyOf(request, reply, email)) ?? deletePage(request, reply, email);
    },
  );

  app.post<{ Params: { email: string }; Body: Form }>(
    "/account/openpgp/delete/:email",
    posted,
    async (request, reply) => {
      const { email } = request.params;
      const missing = await keyOf(request, reply, email);
      if (missing) return missing;
      const confirmed = await confirmPassword(request, reply, services, text(request.body?.password));
      if ("errors" in confirmed) return deletePage(request, reply, email, confirmed.errors, confirmed.status);
      await openPgpIdentities.remove(confirmed.proof.user, email);
      await addFlash(request, { kind: "success", key: "openpgp.deleted", params: { email } });
      return seeOther(reply, "/account/openpgp");
    },
  );
}
