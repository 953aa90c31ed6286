// The page's router: #/key (enter a key), #/sessions, #/s/<session id>[?assistant=<id>], #/admin.
// Without a key in this tab every route shows the key page first.

import { clear } from "./dom.js";
import { getKey, forgetKey, isAdmin } from "./api.js";
import { keyPage } from "./keypage.js";
import { sessionsPage } from "./sessions.js";
import { sessionPage } from "./session.js";
import { adminPage } from "./admin.js";

const main = document.getElementById("main");
const noticeBox = document.getElementById("notice");
const adminLink = document.querySelector('[data-nav="admin"]');
const signOut = document.getElementById("sign-out");
let leave = null;
let admin = null;

function notice(message) {
  noticeBox.textContent = message;
  noticeBox.hidden = !message;
}

function parse() {
  const hash = location.hash.replace(/^#\/?/, "");
  const [path, query = ""] = hash.split("?");
  const parts = path.split("/").map(decodeURIComponent);
  return { name: parts[0] || "sessions", arg: parts[1], query: new URLSearchParams(query) };
}

async function route() {
  if (leave) { leave(); leave = null; }
  clear(main);
  notice("");
  const { name, arg, query } = parse();
  document.querySelectorAll("[data-nav]").forEach((a) => {
    if (a.dataset.nav === name) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  });
  if (!getKey()) {
    signOut.hidden = adminLink.hidden = true;
    admin = null;
    document.title = "Cage: sign in";
    keyPage(main, { notice, next: () => route() });
    return;
  }
  signOut.hidden = false;
  if (admin === null) {
    admin = await isAdmin().catch(() => false);
  }
  adminLink.hidden = !admin;
  if (name === "s" && arg) {
    document.title = `Cage: ${arg}`;
    leave = sessionPage(main, { sessionId: arg, assistantId: query.get("assistant"), notice });
  } else if (name === "admin" && admin) {
    document.title = "Cage: admin";
    leave = adminPage(main, { notice });
  } else {
    document.title = "Cage: sessions";
    leave = sessionsPage(main, { notice });
  }
  main.focus({ preventScroll: true });
}

signOut.addEventListener("click", () => {
  forgetKey();
  location.hash = "#/sessions";
  route();
});
window.addEventListener("hashchange", route);
route();
