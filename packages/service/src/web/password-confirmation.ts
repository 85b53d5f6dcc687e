import type { FastifyReply, FastifyRequest } from "fastify";
import type { FieldErrors, WebServices } from "./context.ts";

/**
 * "Confirm with your password" on a settings page: the sign-in rule with the brute-force policy
 * (a stolen session cannot be used to guess the password), without counting as a sign-in. Returns
 * null when the password is right, else the field error and the status to answer with.
 */
export async function confirmPassword(
  request: FastifyRequest,
  reply: FastifyReply,
  services: WebServices,
  password: string,
  field = "password",
): Promise<{ errors: FieldErrors; status: number } | null> {
  if (password === "") return { errors: { [field]: { key: "form.required" } }, status: 422 };
  const user = request.web.session!.user;
  const check = await services.signIn.signIn(user.email, password, {
    throttle: { client: request.ip },
    deferActivity: true,
  });
  if (check.kind === "throttled") {
    reply.header("retry-after", String(check.retryAfter));
    return {
      errors: { [field]: { key: "login.throttled", params: { count: check.retryAfter } } },
      status: 429,
    };
  }
  if (check.kind === "unknown" || check.kind === "wrong_password")
    return { errors: { [field]: { key: "password.wrong" } }, status: 422 };
  return null;
}
