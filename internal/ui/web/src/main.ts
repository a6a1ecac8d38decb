// The dashboard's entry: a router over the URL fragment (#/ sessions,
// #/s/<id> one session), the API-key prompt, and the connection indicator.
// Each page gets an AbortSignal that ends its live streams when the user
// navigates away.
import { h } from "./dom.js";
import { apiKey, setApiKey, isAuthError, errorText } from "./api.js";
import { sessionsPage } from "./sessions.js";
import { sessionPage } from "./session.js";

export interface Page {
  main: HTMLElement;
  signal: AbortSignal;
  refresh: () => void;
  conn: (state: "live" | "reconnecting" | "auth") => void;
}

const main = document.getElementById("main") as HTMLElement;
const connEl = document.getElementById("conn") as HTMLElement;
const forget = document.getElementById("forget") as HTMLButtonElement;
let current: AbortController | undefined;

function conn(state: "live" | "reconnecting" | "auth"): void {
  if (state === "auth") {
    keyPrompt("The server refused the API key.");
    return;
  }
  connEl.textContent = state === "live" ? "● live" : "○ reconnecting…";
  connEl.dataset.state = state;
}

function keyPrompt(reason: string): void {
  current?.abort();
  connEl.textContent = "";
  forget.hidden = true;
  const input = h("input", { type: "password", id: "api-key", name: "key", autocomplete: "off", required: true, "aria-describedby": "key-why" }) as HTMLInputElement;
  const form = h(
    "form",
    { class: "keyform", id: "key-form", onsubmit: (e: Event) => {
      e.preventDefault();
      setApiKey(input.value.trim());
      route();
    } },
    h("h1", {}, "API key required"),
    h("p", { id: "key-why" }, reason, " The key is kept in this tab only (session storage) and sent as a bearer token."),
    h("label", {}, "API key", input),
    " ",
    h("button", { type: "submit", class: "primary" }, "Open dashboard"),
  );
  main.replaceChildren(form);
  input.focus();
}

async function route(): Promise<void> {
  current?.abort();
  const ctl = new AbortController();
  current = ctl;
  forget.hidden = apiKey() === "";
  const hash = location.hash.replace(/^#/, "") || "/";
  const [path, query] = hash.split("?", 2);
  const pg: Page = { main, signal: ctl.signal, refresh: () => void route(), conn };
  try {
    if (path.startsWith("/s/")) {
      await sessionPage(pg, decodeURIComponent(path.slice(3)));
      document.title = `contextd · ${decodeURIComponent(path.slice(3))}`;
    } else {
      await sessionsPage(pg, new URLSearchParams(query ?? ""));
      document.title = "contextd · sessions";
    }
  } catch (e) {
    if (ctl.signal.aborted) return;
    if (isAuthError(e)) {
      keyPrompt(apiKey() ? "The server refused this API key." : "This server requires an API key.");
      return;
    }
    main.replaceChildren(h("p", { class: "error", role: "alert" }, errorText(e)), h("p", {}, h("a", { href: "#/" }, "Back to sessions")));
  }
}

forget.addEventListener("click", () => {
  setApiKey("");
  keyPrompt("The key was forgotten.");
});
window.addEventListener("hashchange", () => {
  void route();
  main.focus();
});
void route();
