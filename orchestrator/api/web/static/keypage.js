// The key page: the API key is typed here, checked against the server, then kept in this tab's
// sessionStorage only (closing the tab forgets it; it is never put in a URL or a cookie).

import { h } from "./dom.js";
import { get, setKey, forgetKey, ApiError } from "./api.js";

export function keyPage(main, { next, notice }) {
  const input = h("input", { id: "key", name: "key", type: "password", autocomplete: "off", required: true, spellcheck: "false", "aria-describedby": "key-help" });
  const error = h("p", { class: "error-text", id: "key-error", role: "alert" });
  const form = h("form", { class: "key-form", "aria-labelledby": "key-title" },
    h("h1", { id: "key-title" }, "Sign in with an API key"),
    h("label", { for: "key" }, "API key"),
    input,
    h("p", { id: "key-help", class: "help" },
      "Create one with ", h("code", {}, "cage keys create --name me --role user --owner me"),
      ". The key stays in this browser tab (session storage) and is sent only in request headers."),
    error,
    h("button", { type: "submit" }, "Continue"));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    error.textContent = "";
    setKey(input.value.trim());
    try {
      await get("/v1/sessions?limit=1");
      input.value = "";
      notice("");
      next();
    } catch (err) {
      forgetKey();
      error.textContent = err instanceof ApiError && err.status === 401 ? "That key was not accepted (unknown, malformed or revoked)." : `Could not check the key: ${err.message}`;
      input.focus();
    }
  });
  main.append(form);
  input.focus();
}
