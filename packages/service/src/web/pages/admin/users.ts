import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { assignableRoles, notPermitted, roleNotAssignable } from "../../../accounts/admin-scope.ts";
import { userIsActive } from "../../../accounts/lifecycle.ts";
import { readSearch } from "../../../accounts/paging.ts";
import { isRole, knownRoles, type Role } from "../../../accounts/roles.ts";
import {
  addressInvalid,
  addressTaken,
  domainNotManaged,
  mailCryptWithoutKeys,
  quotaInvalid,
  roleUnknown,
  type UserPatch,
  userNotFound,
} from "../../../accounts/users.ts";
import { domainOfAddressNotManaged, type UserListFilter } from "../../../admin/users.ts";
import { isRefusal } from "../../../errors.ts";
import { addFlash, type FieldErrors, pathId, seeOther, type WebServices } from "../../context.ts";
import { newPasswordFields, repeatErrors } from "../../password-confirmation.ts";
import { type RefusalFields, refusalOnField } from "../../refusals.ts";
import { smtpQuotaField } from "./aliases.ts";
import {
  actorOf,
  adminPage,
  adminRoutes,
  cursorOf,
  type Form,
  listUrl,
  param,
  type Query,
  refusedFields,
  segment,
  text,
  texts,
  wholeNumber,
} from "./common.ts";

const yesNo = (value: string): boolean | undefined =>
  value === "enabled" ? true : value === "disabled" ? false : undefined;

/** The list's filters as the query gives them (reference 5.8), kept as text for the form and the links. */
function filtersOf(query: Query) {
  const status = ["active", "deleted", "all"].includes(text(query.status)) ? text(query.status) : "active";
  const role = isRole(text(query.role)) ? text(query.role) : "";
  const mailCrypt = ["enabled", "disabled"].includes(text(query.mailCrypt)) ? text(query.mailCrypt) : "";
  const twoFactor = ["enabled", "disabled"].includes(text(query.twoFactor)) ? text(query.twoFactor) : "";
  const domain = wholeNumber(query.domain);
  return {
    search: readSearch(query.search),
    status,
    role,
    mailCrypt,
    twoFactor,
    domain: domain !== undefined && Number.isFinite(domain) ? String(domain) : "",
  };
}

const userPath = (email: string) => `/admin/users/${segment(email)}`;

/** The user form's refusals from the services, each next to its field. */
const userFields: RefusalFields = [
  [addressTaken, "email"],
  [addressInvalid, "email"],
  [domainNotManaged, "email"],
  [domainOfAddressNotManaged, "email"],
  [roleNotAssignable, "roles"],
  [roleUnknown, "roles"],
  [quotaInvalid, "quota"],
  [mailCryptWithoutKeys, "mailCrypt"],
  ...newPasswordFields("password"),
];

/** `/admin/users…`: the list with its filters, the user page, create, edit, delete, reset, restore. */
export async function adminUserPages(app: FastifyInstance, services: WebServices) {
  const { admin } = services;
  const { guarded, posted } = adminRoutes(app);

  app.get<{ Querystring: Query }>("/admin/users", guarded, async (request, reply) => {
    const actor = actorOf(request);
    const filters = filtersOf(request.query);
    const filter: UserListFilter = {
      search: filters.search,
      status: filters.status as UserListFilter["status"],
      ...(filters.role ? { role: filters.role as Role } : {}),
      ...(yesNo(filters.mailCrypt) === undefined ? {} : { mailCrypt: yesNo(filters.mailCrypt) }),
      ...(yesNo(filters.twoFactor) === undefined ? {} : { twoFactor: yesNo(filters.twoFactor) }),
      ...(filters.domain ? { domainId: Number(filters.domain) } : {}),
    };
    const [page, domains] = await Promise.all([
      admin.users.list(actor, filter, cursorOf(request.query)),
      admin.domains.choices(actor),
    ]);
    return adminPage(request, reply, "admin/users/list", {
      page,
      filters,
      domains,
      roles: knownRoles,
      newerUrl: page.newer === null ? null : listUrl("/admin/users", filters, { before: page.newer }),
      olderUrl: page.older === null ? null : listUrl("/admin/users", filters, { after: page.older }),
      firstUrl: listUrl("/admin/users", filters, {}),
      userPath,
    });
  });

  // ---- create

  const createForm = async (
    request: FastifyRequest,
    reply: FastifyReply,
    values: Record<string, unknown> = {},
    errors: FieldErrors = {},
    status = 200,
  ) => {
    const actor = actorOf(request);
    const domains = await admin.domains.choices(actor);
    return adminPage(
      request,
      reply,
      "admin/users/form",
      {
        mode: "create",
        values: { roles: ["ROLE_USER"], ...values },
        errors,
        assignable: assignableRoles(actor),
        held: [],
        domains,
        action: "/admin/users/new",
      },
      status,
    );
  };

  app.get("/admin/users/new", guarded, (request, reply) => createForm(request, reply));

  app.post<{ Body: Form }>("/admin/users/new", posted, async (request, reply) => {
    const actor = actorOf(request);
    const body = request.body ?? {};
    const email = text(body.email).trim().toLowerCase();
    const values = { ...formValues(body), email };
    const errors: FieldErrors = {};
    if (email === "") errors.email = { key: "form.required" };
    const numbers = quotaFields(body, errors);
    Object.assign(errors, repeatErrors(text(body.password), text(body.passwordRepeat), "password"));
    if (Object.keys(errors).length > 0) return createForm(request, reply, values, errors, 422);
    try {
      const created = await admin.users.create(actor, {
        email,
        password: text(body.password),
        roles: texts(body.roles),
        quota: numbers.quota ?? null,
        smtpQuota: { per_hour: numbers.perHour ?? null, per_day: numbers.perDay ?? null },
        passwordChangeRequired: text(body.passwordChangeRequired) === "yes",
      });
      // The recovery token is shown in this answer only: never in a URL, the session or a log.
      return adminPage(request, reply, "admin/users/credentials", {
        email: created.user.email,
        recoveryToken: created.recoveryToken,
        heading: "admin.users.created",
      });
    } catch (error) {
      // A domain admin naming another domain: the reference's form error, with a 403.
      if (isRefusal(error, notPermitted))
        return createForm(request, reply, values, { email: { key: "admin.users.domainUnknown" } }, 403);
      const refused = refusedFields(reply, error, userFields, smtpQuotaField(error) ?? "email");
      if (refused) return createForm(request, reply, values, refused.errors, refused.status);
      throw error;
    }
  });

  // ---- show

  const showPage = async (
    request: FastifyRequest,
    reply: FastifyReply,
    errors: FieldErrors = {},
    status = 200,
  ) => {
    const actor = actorOf(request);
    const facts = await admin.users.facts(actor, param(request, "email"));
    const user = await admin.users.get(actor, facts.user.email);
    const [appPasswordList, domainRequired] = await Promise.all([
      admin.appPasswords.list(actor, user.email),
      services.domains.appPasswordsRequired(user.domainId),
    ]);
    return adminPage(
      request,
      reply,
      "admin/users/show",
      {
        facts,
        userPath,
        aliasPath: (s: string) => `/admin/aliases/${segment(s)}/edit`,
        appPasswords: appPasswordList,
        appPasswordsSetting:
          user.appPasswordsRequired === null ? "default" : user.appPasswordsRequired ? "on" : "off",
        domainRequired,
        errors,
      },
      status,
    );
  };

  app.get("/admin/users/:email", guarded, (request, reply) => showPage(request, reply));

  // ---- app passwords: revoke one; "mail apps must use app passwords" on, off or the domain's default

  app.post<{ Params: { email: string; id: string } }>(
    "/admin/users/:email/app-passwords/:id/revoke",
    posted,
    async (request, reply) => {
      const actor = actorOf(request);
      const user = await admin.users.get(actor, param(request, "email"));
      const id = pathId(request.params.id);
      // Another user's id is not found (404), and nothing changes.
      await admin.appPasswords.revoke(actor, user.email, id);
      await addFlash(request, {
        kind: "success",
        key: "admin.appPasswords.revoked",
        params: { email: user.email },
      });
      return seeOther(reply, userPath(user.email));
    },
  );

  app.post<{ Body: Form }>("/admin/users/:email/app-passwords-required", posted, async (request, reply) => {
    const actor = actorOf(request);
    const user = await admin.users.get(actor, param(request, "email"));
    const settings: Record<string, boolean | null> = { on: true, off: false, default: null };
    const setting = text(request.body?.appPasswordsRequired);
    if (!Object.hasOwn(settings, setting))
      return showPage(
        request,
        reply,
        { appPasswordsRequired: { key: "refusal.app_password.required_invalid" } },
        422,
      );
    await admin.users.update(actor, user.email, { appPasswordsRequired: settings[setting] ?? null });
    await addFlash(request, {
      kind: "success",
      key: "admin.appPasswords.saved",
      params: { email: user.email },
    });
    return seeOther(reply, userPath(user.email));
  });

  // ---- edit

  const editForm = async (
    request: FastifyRequest,
    reply: FastifyReply,
    values: Record<string, unknown> | null,
    errors: FieldErrors = {},
    status = 200,
  ) => {
    const actor = actorOf(request);
    const user = await admin.users.get(actor, param(request, "email"));
    const assignable = assignableRoles(actor);
    return adminPage(
      request,
      reply,
      "admin/users/form",
      {
        mode: "edit",
        email: user.email,
        values: values ?? {
          roles: user.roles,
          quota: user.quota ?? "",
          smtpPerHour: user.smtpQuota.perHour ?? "",
          smtpPerDay: user.smtpQuota.perDay ?? "",
          passwordChangeRequired: user.passwordChangeRequired,
        },
        errors,
        assignable,
        held: user.roles.filter((role) => !assignable.includes(role)),
        deleted: user.deleted,
        action: `${userPath(user.email)}/edit`,
      },
      status,
    );
  };

  app.get("/admin/users/:email/edit", guarded, (request, reply) => editForm(request, reply, null));

  app.post<{ Body: Form }>("/admin/users/:email/edit", posted, async (request, reply) => {
    const actor = actorOf(request);
    const body = request.body ?? {};
    const user = await admin.users.get(actor, param(request, "email"));
    const values = formValues(body);
    const errors: FieldErrors = {};
    const numbers = quotaFields(body, errors);
    if (Object.keys(errors).length > 0) return editForm(request, reply, values, errors, 422);
    // Roles the editor may not assign are not in the form: they stay as they are. A posted role
    // outside the editor's reach (a crafted form) reaches the service, which refuses it.
    const assignable = assignableRoles(actor);
    const posted = texts(body.roles).filter(isRole);
    const roles = [...new Set([...user.roles.filter((role) => !assignable.includes(role)), ...posted])];
    const patch: UserPatch = {
      roles,
      quota: numbers.quota ?? null,
      smtpQuota: { per_hour: numbers.perHour ?? null, per_day: numbers.perDay ?? null },
      passwordChangeRequired: text(body.passwordChangeRequired) === "yes",
    };
    try {
      await admin.users.update(actor, user.email, patch);
    } catch (error) {
      const refused = refusedFields(reply, error, userFields, smtpQuotaField(error) ?? "roles");
      if (refused) return editForm(request, reply, values, refused.errors, refused.status);
      throw error;
    }
    await addFlash(request, { kind: "success", key: "admin.users.saved", params: { email: user.email } });
    return seeOther(reply, userPath(user.email));
  });

  // ---- delete (a page of its own to confirm)

  app.get("/admin/users/:email/delete", guarded, async (request, reply) => {
    const user = await admin.users.get(actorOf(request), param(request, "email"));
    return adminPage(request, reply, "admin/confirm", {
      title: "admin.users.deleteTitle",
      question: "admin.users.deleteQuestion",
      params: { email: user.email },
      action: `${userPath(user.email)}/delete`,
      submit: "admin.users.delete",
      back: userPath(user.email),
    });
  });

  app.post("/admin/users/:email/delete", posted, async (request, reply) => {
    // The deletion reads the user once, checks it and deletes it, in one transaction.
    const user = await admin.users.delete(actorOf(request), param(request, "email"));
    await addFlash(request, { kind: "success", key: "admin.users.deleted", params: { email: user.email } });
    return seeOther(reply, "/admin/users");
  });

  // ---- reset and restore: a new password, shown the new recovery token once

  for (const verb of ["reset", "restore"] as const) {
    const form = async (
      request: FastifyRequest,
      reply: FastifyReply,
      errors: FieldErrors = {},
      status = 200,
    ) => {
      const user = await admin.users.get(actorOf(request), param(request, "email"));
      return adminPage(
        request,
        reply,
        "admin/users/password",
        {
          verb,
          email: user.email,
          errors,
          action: `${userPath(user.email)}/${verb}`,
          back: userPath(user.email),
        },
        status,
      );
    };
    app.get(`/admin/users/:email/${verb}`, guarded, (request, reply) => form(request, reply));
    app.post<{ Body: Form }>(`/admin/users/:email/${verb}`, posted, async (request, reply) => {
      const actor = actorOf(request);
      const user = await admin.users.get(actor, param(request, "email"));
      const body = request.body ?? {};
      const password = text(body.password);
      const errors = repeatErrors(password, text(body.passwordRepeat), "password");
      if (Object.keys(errors).length > 0) return form(request, reply, errors, 422);
      let recoveryToken: string | null;
      try {
        ({ recoveryToken } = await admin.users[verb](actor, user.email, password));
      } catch (error) {
        const refused = refusalOnField(reply, error, newPasswordFields("password"));
        if (refused) return form(request, reply, refused.errors, refused.status);
        if (isRefusal(error, userIsActive))
          return form(request, reply, { password: { key: "admin.users.isActive" } }, 409);
        if (isRefusal(error, userNotFound))
          return form(request, reply, { password: { key: "admin.users.isDeleted" } }, 409);
        throw error;
      }
      return adminPage(request, reply, "admin/users/credentials", {
        email: user.email,
        recoveryToken,
        heading: verb === "reset" ? "admin.users.wasReset" : "admin.users.wasRestored",
      });
    });
  }

  // ---- second factor off, sessions ended: a button on the user page each

  app.post("/admin/users/:email/totp/off", posted, async (request, reply) => {
    const actor = actorOf(request);
    const user = await admin.users.get(actor, param(request, "email"));
    await admin.users.disableTotp(actor, user.email);
    await addFlash(request, { kind: "success", key: "admin.users.totpOff", params: { email: user.email } });
    return seeOther(reply, userPath(user.email));
  });

  app.post("/admin/users/:email/sessions/end", posted, async (request, reply) => {
    const actor = actorOf(request);
    const user = await admin.users.get(actor, param(request, "email"));
    await admin.users.endSessions(actor, user.email);
    await addFlash(request, {
      kind: "success",
      key: "admin.users.sessionsEnded",
      params: { email: user.email },
    });
    return seeOther(reply, userPath(user.email));
  });
}

/** The form's values as it was sent, for showing it again. */
function formValues(body: Form): Record<string, unknown> {
  return {
    email: text(body.email),
    roles: texts(body.roles),
    quota: text(body.quota),
    smtpPerHour: text(body.smtpPerHour),
    smtpPerDay: text(body.smtpPerDay),
    passwordChangeRequired: text(body.passwordChangeRequired) === "yes",
  };
}

/** Quota and SMTP limits: empty means none (the setting's default), otherwise a whole number. */
function quotaFields(body: Form, errors: FieldErrors) {
  const read = (field: string) => {
    const value = wholeNumber(body[field]);
    if (value !== undefined && !Number.isFinite(value)) errors[field] = { key: "admin.wholeNumber" };
    return value !== undefined && Number.isFinite(value) ? value : undefined;
  };
  return { quota: read("quota"), perHour: read("smtpPerHour"), perDay: read("smtpPerDay") };
}
