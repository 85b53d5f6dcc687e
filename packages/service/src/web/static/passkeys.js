// Passkeys in the browser (pages/passkeys.ts): asks the server for options, lets the browser make or
// use a passkey, posts the answer back as JSON with the page's CSRF token, then follows the answer.
// Elements marked data-passkey stay hidden unless this runs in a browser that has WebAuthn.
(() => {
  if (!window.PublicKeyCredential || !navigator.credentials) return;

  const toBytes = (text) => {
    const base64 = text.replace(/-/g, "+").replace(/_/g, "/") + "===".slice((text.length + 3) % 4);
    return Uint8Array.from(atob(base64), (c) => c.charCodeAt(0));
  };
  const toText = (buffer) => {
    let binary = "";
    for (const byte of new Uint8Array(buffer)) binary += String.fromCharCode(byte);
    return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  };
  const credentialsOf = (list) => (list || []).map((c) => ({ ...c, id: toBytes(c.id) }));

  const post = async (url, csrf, body) => {
    const response = await fetch(url, {
      method: "POST",
      credentials: "same-origin",
      headers: { "content-type": "application/json", "csrf-token": csrf },
      body: JSON.stringify(body),
    });
    let answer = null;
    try {
      answer = await response.json();
    } catch {}
    return { ok: response.ok, answer: answer || {} };
  };

  const creation = (options) => ({
    ...options,
    challenge: toBytes(options.challenge),
    user: { ...options.user, id: toBytes(options.user.id) },
    excludeCredentials: credentialsOf(options.excludeCredentials),
  });
  const request = (options) => ({
    ...options,
    challenge: toBytes(options.challenge),
    allowCredentials: credentialsOf(options.allowCredentials),
  });

  // A credential as JSON, the same around both ceremonies' responses.
  const asJson = (credential, response) => ({
    id: credential.id,
    rawId: toText(credential.rawId),
    type: credential.type,
    authenticatorAttachment: credential.authenticatorAttachment || undefined,
    clientExtensionResults: credential.getClientExtensionResults(),
    response: { clientDataJSON: toText(credential.response.clientDataJSON), ...response },
  });
  const registration = (credential) =>
    asJson(credential, {
      attestationObject: toText(credential.response.attestationObject),
      transports: credential.response.getTransports ? credential.response.getTransports() : [],
    });
  const assertion = (credential) =>
    asJson(credential, {
      authenticatorData: toText(credential.response.authenticatorData),
      signature: toText(credential.response.signature),
      userHandle: credential.response.userHandle ? toText(credential.response.userHandle) : undefined,
    });

  /** Shows a message in the box's alert (and marks the field it belongs to), or clears it. */
  const say = (box, message, field) => {
    const alert = box.querySelector("[data-passkey-error]");
    alert.textContent = message || "";
    alert.hidden = !message;
    // Styled as an error only while it says one (an empty one is no error of the page).
    alert.classList.toggle("error", Boolean(message));
    for (const input of box.querySelectorAll("input[aria-invalid]")) input.removeAttribute("aria-invalid");
    const input = field && box.querySelector(`[name="${field}"]`);
    if (input) {
      input.setAttribute("aria-invalid", "true");
      input.focus();
    }
  };

  /** One ceremony: options, the browser's part, the answer; the server says where to go next. */
  const run = async (box, csrf, steps) => {
    say(box, "");
    const started = await post(box.dataset.options, csrf, steps.optionsBody());
    if (!started.ok || !started.answer.options)
      return say(box, started.answer.message || box.dataset.failed, started.answer.field);
    let credential;
    try {
      credential = await steps.browser(started.answer.options);
    } catch {
      return say(box, box.dataset.failed);
    }
    if (!credential) return say(box, box.dataset.failed);
    const done = await post(steps.verifyUrl, csrf, steps.answerBody(credential));
    if (done.ok && done.answer.redirect) window.location.assign(done.answer.redirect);
    else say(box, done.answer.message || box.dataset.failed, done.answer.field);
  };

  for (const hint of document.querySelectorAll("[data-passkey-noscript]")) hint.hidden = true;

  /** The page's CSRF token, as its forms carry it (a hidden field in the box). */
  const csrfOf = (box) => box.querySelector('input[name="_csrf"]').value;

  for (const form of document.querySelectorAll('form[data-passkey="register"]')) {
    form.hidden = false;
    const csrf = csrfOf(form);
    const value = (name) => form.querySelector(`[name="${name}"]`).value;
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      run(form, csrf, {
        optionsBody: () => ({ name: value("name"), password: value("password") }),
        browser: (options) => navigator.credentials.create({ publicKey: creation(options) }),
        verifyUrl: form.getAttribute("action"),
        answerBody: (credential) => ({ name: value("name"), response: registration(credential) }),
      });
    });
  }

  for (const box of document.querySelectorAll('[data-passkey="second-factor"], [data-passkey="sign-in"]')) {
    box.hidden = false;
    box.querySelector("[data-passkey-start]").addEventListener("click", () =>
      run(box, csrfOf(box), {
        optionsBody: () => ({}),
        browser: (options) => navigator.credentials.get({ publicKey: request(options) }),
        verifyUrl: box.dataset.verify,
        answerBody: (credential) => ({ response: assertion(credential) }),
      }),
    );
  }
})();
