import type { FastifyReply, FastifyRequest } from "fastify";
import {
  passwordBlank,
  passwordIdentical,
  passwordLeaked,
  passwordTooLong,
  passwordTooShort,
} from "../accounts/password-policy.ts";
import { type ConfirmedPassword, passwordWrong, signInThrottled } from "../accounts/sign-in.ts";
import type { FieldErrors, WebServices } from "./context.ts";
import { webOrigin } from "./origin.ts";
import { type RefusalFields, refusalOnField } from "./refusals.ts";

/**
 * "Confirm with your password" on a settings page: the service's one re-confirmation
 * (`SignInService.confirmPassword`, under the brute-force policy), its refusals shown on `field`.
 */
export async function confirmPassword(
  request: FastifyRequest,
  reply: FastifyReply,
  services: WebServices,
  password: string,
  field = "password",
): Promise<{ proof: ConfirmedPassword } | { errors: FieldErrors; status: number }> {
  if (password === "") return { errors: { [field]: { key: "form.required" } }, status: 422 };
  try {
    const origin = webOrigin(request, reply);
    return { proof: await services.signIn.confirmPassword(request.web.session!.user, password, origin) };
  } catch (error) {
    const refused = refusalOnField(reply, error, [
      [passwordWrong, field],
      [signInThrottled, field],
    ]);
    if (refused) return refused;
    throw error;
  }
}

/** The password rule's refusals (accounts/password-policy.ts) on a form's new-password field. */
export const newPasswordFields = (field: string): RefusalFields => [
  [passwordBlank, field],
  [passwordTooShort, field],
  [passwordTooLong, field],
  [passwordLeaked, field],
  [passwordIdentical, field],
];

/** A new password typed twice: the repeat field's error when they differ (the page's own check). */
export const repeatErrors = (password: string, repeated: string, field = "newPassword"): FieldErrors =>
  password === repeated ? {} : { [`${field}Repeat`]: { key: "password.mismatch" } };
