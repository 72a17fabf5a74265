/* The lead form at `/` (templates/leadgen/lead_form.html): three steps, then one JSON POST to
 * /api/leads (leadgen/serializers.py), with inline errors from the API's `error.fields`. The consent box
 * must be ticked; the request names the version and the text the page showed, which the server checks. */
(() => {
  "use strict";

  const CONTACT_FIELDS = ["firstName", "lastName", "email", "phone", "company", "message"];
  const FIELDS_WITH_ERRORS = [...CONTACT_FIELDS, "consent"];
  const INLINE_FIELDS = ["serviceType", ...FIELDS_WITH_ERRORS];
  const UTM_KEYS = ["source", "medium", "campaign", "term", "content"];
  const NETWORK_ERROR = "We could not reach our server. Please check your connection and send again.";
  const SERVER_ERROR = "Something went wrong on our side. Please try again in a moment.";
  const RECAPTCHA_ERROR = "Our spam check could not run. Please reload the page and try again.";
  const THROTTLED = "You have sent several requests in a short time.";
  const CONSENT_MISSING = "Tick this box so that we may keep your details to answer you.";

  const form = document.getElementById("lead-form");
  const steps = [...form.querySelectorAll(".step")];
  const progress = [...form.querySelectorAll(".progress li")];
  const backButton = form.querySelector("[data-back]");
  const primaryButton = form.querySelector("[data-primary]");
  const generalError = document.getElementById("lead-form-error");
  const success = document.getElementById("lead-form-success");
  const consent = form.elements.consent;
  const consentText = document.getElementById("field-consent-text");
  const { recaptchaSiteKey, recaptchaAction } = form.dataset;

  // Where the visitor came from and the campaign of the link they followed, captured once.
  const sourcePage = (document.referrer || location.href).slice(0, 500);
  const query = new URLSearchParams(location.search);
  const utm = {};
  for (const key of UTM_KEYS) {
    const value = query.get(`utm_${key}`);
    if (value) utm[key] = value.slice(0, 200);
  }

  let current = 0;
  let sending = false;
  // The request in flight: sent again with the same Idempotency-Key and fields until the server answers it,
  // so a retry after a lost response replays the first answer instead of creating a second lead.
  let attempt = null;

  function showStep(index) {
    current = index;
    steps.forEach((step, i) => {
      step.hidden = i !== index;
    });
    progress.forEach((item, i) => {
      item.classList.toggle("done", i < index);
      if (i === index) item.setAttribute("aria-current", "step");
      else item.removeAttribute("aria-current");
    });
    backButton.hidden = index === 0;
    primaryButton.textContent = index === steps.length - 1 ? "Send request" : "Next";
    clearGeneralError();
    steps[index].querySelector(".step-title").focus();
  }

  function selectedService() {
    const checked = form.querySelector('input[name="serviceType"]:checked');
    return checked ? checked.value : null;
  }

  function next() {
    if (current === 0) {
      const service = selectedService();
      if (service === null) {
        setFieldError("serviceType", ["Choose one to continue."]);
        form.querySelector('input[name="serviceType"]').focus();
        return;
      }
      form.querySelectorAll(".question-set").forEach((set) => {
        set.hidden = set.dataset.service !== service;
      });
    }
    showStep(current + 1);
  }

  function setFieldError(name, messages) {
    document.getElementById(`field-${name}`).setAttribute("aria-invalid", "true");
    const error = document.getElementById(`field-${name}-error`);
    error.textContent = messages.join(" ");
    error.hidden = false;
  }

  function clearFieldError(name) {
    document.getElementById(`field-${name}`).removeAttribute("aria-invalid");
    const error = document.getElementById(`field-${name}-error`);
    error.hidden = true;
    error.textContent = "";
  }

  function showGeneralError(message) {
    generalError.textContent = message;
    generalError.hidden = false;
  }

  function clearGeneralError() {
    generalError.hidden = true;
    generalError.textContent = "";
  }

  // Messages of one field: a list, or a map of sub-fields (utm) to lists.
  const flatten = (messages) => (typeof messages === "string" ? [messages] : Object.values(messages).flatMap(flatten));

  // "in 20 minutes", from a Retry-After header in seconds.
  function retryPhrase(retryAfter) {
    const seconds = Number.parseInt(retryAfter, 10);
    if (!(seconds > 0)) return "later";
    const minutes = Math.ceil(seconds / 60);
    if (minutes === 1) return "in a minute";
    return minutes < 90 ? `in ${minutes} minutes` : `in ${Math.round(minutes / 60)} hours`;
  }

  function stepAnswers() {
    const answers = {};
    form.querySelectorAll(".question-set:not([hidden]) .question").forEach((question) => {
      const chosen = [...question.querySelectorAll("input:checked")].map((input) => input.value);
      if (chosen.length === 0) return;
      answers[question.dataset.question] = question.querySelector('input[type="checkbox"]') ? chosen : chosen[0];
    });
    return answers;
  }

  function payload() {
    const body = { serviceType: selectedService(), steps: stepAnswers(), sourcePage };
    for (const name of CONTACT_FIELDS) body[name] = form.elements[name].value.trim();
    if (Object.keys(utm).length > 0) body.utm = utm;
    body.consent = { version: consent.value, text: consentText.textContent };
    return body;
  }

  function uuid4() {
    // crypto.randomUUID() exists only on https pages; getRandomValues() everywhere.
    const bytes = crypto.getRandomValues(new Uint8Array(16));
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    const hex = [...bytes].map((byte) => byte.toString(16).padStart(2, "0")).join("");
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
  }

  function recaptchaToken() {
    if (!recaptchaSiteKey) return Promise.resolve("");
    return new Promise((resolve, reject) => {
      if (!window.grecaptcha) {
        reject(new Error("reCAPTCHA did not load"));
        return;
      }
      window.grecaptcha.ready(() => {
        window.grecaptcha.execute(recaptchaSiteKey, { action: recaptchaAction }).then(resolve, reject);
      });
    });
  }

  async function send() {
    clearGeneralError();
    FIELDS_WITH_ERRORS.forEach(clearFieldError);
    if (!consent.checked) {
      setFieldError("consent", [CONSENT_MISSING]);
      showGeneralError("Please correct the highlighted fields.");
      consent.focus();
      return;
    }
    const fields = JSON.stringify(payload());
    if (!attempt || attempt.fields !== fields) attempt = { key: uuid4(), fields };
    // A fresh token for every send, the same key: a token is used up once checked, and the server leaves
    // it out of what makes two requests the same.
    let token;
    try {
      token = await recaptchaToken();
    } catch {
      showGeneralError(RECAPTCHA_ERROR);
      return;
    }
    const body = token ? JSON.stringify({ ...JSON.parse(fields), recaptchaToken: token }) : fields;
    let response;
    try {
      response = await fetch(form.action, {
        method: "POST",
        headers: { "Content-Type": "application/json", Accept: "application/json", "Idempotency-Key": attempt.key },
        body,
      });
    } catch {
      showGeneralError(NETWORK_ERROR);
      return;
    }
    // Kept for the next click when the server has not answered this request yet: 409, the first request
    // with this key is still running; 502/503/504, a proxy's answer, the request may have saved the lead.
    if (![409, 502, 503, 504].includes(response.status)) attempt = null;
    if (response.ok) showSuccess(await response.json());
    else await showResponseError(response);
  }

  async function showResponseError(response) {
    const error = await response.json().then(
      (body) => body.error || {},
      () => ({}), // not JSON: a proxy's error page
    );
    if (response.status === 429) {
      const reason = error.code === "throttled" || !error.message ? THROTTLED : error.message;
      showGeneralError(`${reason} Please try again ${retryPhrase(response.headers.get("Retry-After"))}.`);
      return;
    }
    if (response.status >= 500 || !error.message) {
      showGeneralError(SERVER_ERROR);
      return;
    }
    if (!error.fields) {
      showGeneralError(error.message);
      return;
    }
    const others = [];
    for (const [name, messages] of Object.entries(error.fields)) {
      if (FIELDS_WITH_ERRORS.includes(name)) setFieldError(name, flatten(messages));
      else others.push(...flatten(messages));
    }
    showGeneralError(others.length > 0 ? others.join(" ") : "Please correct the highlighted fields.");
    const invalid = form.querySelector('.step:not([hidden]) [aria-invalid="true"]');
    if (invalid) invalid.focus();
  }

  function showSuccess(body) {
    const firstName = form.elements.firstName.value.trim();
    success.querySelector("[data-success-name]").textContent = firstName ? `, ${firstName}` : "";
    success.querySelector("[data-success-email]").textContent = form.elements.email.value.trim();
    const preview = success.querySelector("[data-success-preview]");
    if (body.previewUrl) {
      preview.querySelector("a").href = body.previewUrl;
      preview.hidden = false;
    } else if (body.prototype && body.prototype.progressUrl) {
      // The prototype is being built: its progress page follows it live.
      const link = preview.querySelector("a");
      link.href = body.prototype.progressUrl;
      link.textContent = "Watch your prototype being built";
      preview.hidden = false;
    }
    form.hidden = true;
    success.hidden = false;
    success.querySelector(".step-title").focus();
  }

  function setBusy(busy) {
    form.setAttribute("aria-busy", String(busy));
    backButton.disabled = busy;
    primaryButton.disabled = busy;
    primaryButton.textContent = busy ? "Sending…" : "Send request";
  }

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (sending) return;
    if (current < steps.length - 1) {
      next();
      return;
    }
    sending = true;
    setBusy(true);
    try {
      await send();
    } finally {
      sending = false;
      setBusy(false);
    }
  });

  backButton.addEventListener("click", () => showStep(current - 1));

  form.addEventListener("input", (event) => {
    if (INLINE_FIELDS.includes(event.target.name)) clearFieldError(event.target.name);
  });
})();
