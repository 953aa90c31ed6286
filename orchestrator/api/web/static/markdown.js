// A small Markdown renderer of our own (no dependency, no innerHTML): the subset agents write.
// Blocks: ATX headings, fenced code, block quotes, bullet and numbered lists, horizontal rules,
// tables (pipe rows), paragraphs. Inline: `code`, **bold**, *italic* / _italic_, ~~strike~~,
// [links](https://...) (http, https and mailto only; others stay text). Text is always a text
// node, so agent output can never become markup or script.

import { h } from "./dom.js";

const FENCE = /^(\s{0,3})(`{3,}|~{3,})\s*([\w+-]*)/;
const HEADING = /^(#{1,6})\s+(.*?)\s*#*\s*$/;
const BULLET = /^\s{0,3}[-*+]\s+(.*)$/;
const NUMBERED = /^\s{0,3}(\d{1,9})[.)]\s+(.*)$/;
const RULE = /^\s{0,3}([-*_])(\s*\1){2,}\s*$/;
const QUOTE = /^\s{0,3}>\s?(.*)$/;
const TABLE_SEP = /^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$/;

export function renderMarkdown(source) {
  const root = h("div", { class: "md" });
  renderBlocks(String(source ?? "").replace(/\r\n?/g, "\n").split("\n"), root);
  return root;
}

function renderBlocks(lines, parent) {
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (!line.trim()) { i += 1; continue; }
    const fence = FENCE.exec(line);
    if (fence) {
      const marker = fence[2];
      const body = [];
      i += 1;
      while (i < lines.length && !lines[i].trimStart().startsWith(marker)) { body.push(lines[i]); i += 1; }
      i += 1;
      const code = h("code", fence[3] ? { class: `language-${fence[3]}` } : {}, body.join("\n"));
      parent.append(h("pre", {}, code));
      continue;
    }
    const heading = HEADING.exec(line);
    if (heading) {
      const level = Math.min(heading[1].length + 2, 6); // the page owns h1/h2
      parent.append(h(`h${level}`, {}, inline(heading[2])));
      i += 1;
      continue;
    }
    if (RULE.test(line)) { parent.append(h("hr")); i += 1; continue; }
    if (QUOTE.test(line)) {
      const body = [];
      while (i < lines.length && QUOTE.test(lines[i])) { body.push(QUOTE.exec(lines[i])[1]); i += 1; }
      const quote = h("blockquote");
      renderBlocks(body, quote);
      parent.append(quote);
      continue;
    }
    if (BULLET.test(line) || NUMBERED.test(line)) {
      const ordered = !BULLET.test(line);
      const pattern = ordered ? NUMBERED : BULLET;
      const list = h(ordered ? "ol" : "ul");
      if (ordered) {
        const start = Number(NUMBERED.exec(line)[1]);
        if (start !== 1) list.setAttribute("start", String(start));
      }
      while (i < lines.length && pattern.test(lines[i])) {
        const match = pattern.exec(lines[i]);
        let text = ordered ? match[2] : match[1];
        i += 1;
        while (i < lines.length && /^\s{2,}\S/.test(lines[i]) && !pattern.test(lines[i])) {
          text += ` ${lines[i].trim()}`;
          i += 1;
        }
        const task = /^\[([ xX])\]\s+(.*)$/.exec(text);
        list.append(task
          ? h("li", { class: "task" }, h("input", { type: "checkbox", disabled: true, checked: task[1] !== " ", "aria-label": task[1] !== " " ? "done" : "not done" }), " ", inline(task[2]))
          : h("li", {}, inline(text)));
      }
      parent.append(list);
      continue;
    }
    if (line.includes("|") && i + 1 < lines.length && TABLE_SEP.test(lines[i + 1])) {
      const cells = (row) => row.trim().replace(/^\|/, "").replace(/\|$/, "").split("|").map((c) => c.trim());
      const head = h("tr", {}, cells(line).map((c) => h("th", { scope: "col" }, inline(c))));
      i += 2;
      const body = h("tbody");
      while (i < lines.length && lines[i].includes("|") && lines[i].trim()) {
        body.append(h("tr", {}, cells(lines[i]).map((c) => h("td", {}, inline(c)))));
        i += 1;
      }
      parent.append(h("div", { class: "table-wrap" }, h("table", {}, h("thead", {}, head), body)));
      continue;
    }
    const para = [];
    while (i < lines.length && lines[i].trim() && !FENCE.test(lines[i]) && !HEADING.test(lines[i])
      && !QUOTE.test(lines[i]) && !BULLET.test(lines[i]) && !RULE.test(lines[i])
      && !(para.length && NUMBERED.test(lines[i]))) {
      para.push(lines[i]);
      i += 1;
    }
    const p = h("p");
    para.forEach((text, n) => {
      if (n) p.append(/ {2}$|\\$/.test(para[n - 1]) ? h("br") : " ");
      p.append(...inline(text.replace(/( {2}|\\)$/, "")));
    });
    parent.append(p);
  }
}

const INLINE = /(`+)([\s\S]*?[^`])\1(?!`)|\*\*([^*]+?)\*\*|__([^_]+?)__|~~([^~]+?)~~|\*([^*\s][^*]*?)\*|(?<![\w])_([^_\s][^_]*?)_(?![\w])|\[([^\]]+)\]\(([^)\s]+)\)|(https?:\/\/[^\s<>()]+[^\s<>().,;:!?'"])/;

/** Inline spans as nodes; anything unmatched stays text. */
export function inline(text) {
  const nodes = [];
  let rest = String(text);
  while (rest) {
    const m = INLINE.exec(rest);
    if (!m) { nodes.push(document.createTextNode(rest)); break; }
    if (m.index) nodes.push(document.createTextNode(rest.slice(0, m.index)));
    if (m[1]) nodes.push(h("code", {}, m[2].trim() ? m[2].replace(/^ (.*) $/, "$1") : m[2]));
    else if (m[3] || m[4]) nodes.push(h("strong", {}, inline(m[3] ?? m[4])));
    else if (m[5]) nodes.push(h("del", {}, inline(m[5])));
    else if (m[6] || m[7]) nodes.push(h("em", {}, inline(m[6] ?? m[7])));
    else if (m[8]) nodes.push(link(m[9], inline(m[8]), m[0]));
    else if (m[10]) nodes.push(link(m[10], [m[10]], m[10]));
    rest = rest.slice(m.index + m[0].length);
  }
  return nodes;
}

function link(href, label, raw) {
  let url;
  try { url = new URL(href); } catch { return document.createTextNode(raw); }
  if (!["http:", "https:", "mailto:"].includes(url.protocol)) return document.createTextNode(raw);
  return h("a", { href: url.href, rel: "noopener noreferrer nofollow", target: "_blank" }, label);
}
