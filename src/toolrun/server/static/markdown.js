// An answer's Markdown (CommonMark + GFM tables) as DOM: marked parses, DOMPurify sanitises, highlight.js
// colours code. Raw HTML in an answer stays text (the renderer escapes it), links go only to http(s) and
// mailto, and whatever slipped through would still meet the page's CSP (no inline script, no eval).
import { Marked } from "./vendor/marked.esm.js";
import DOMPurify from "./vendor/purify.es.mjs";
import hljs from "./vendor/highlight/core.min.js";
import bash from "./vendor/highlight/bash.min.js";
import css from "./vendor/highlight/css.min.js";
import diff from "./vendor/highlight/diff.min.js";
import javascript from "./vendor/highlight/javascript.min.js";
import json from "./vendor/highlight/json.min.js";
import plaintext from "./vendor/highlight/plaintext.min.js";
import python from "./vendor/highlight/python.min.js";
import shell from "./vendor/highlight/shell.min.js";
import sql from "./vendor/highlight/sql.min.js";
import typescript from "./vendor/highlight/typescript.min.js";
import xml from "./vendor/highlight/xml.min.js";
import yaml from "./vendor/highlight/yaml.min.js";

for (const [name, language] of Object.entries({ bash, css, diff, javascript, json, plaintext, python, shell, sql, typescript, xml, yaml })) {
  hljs.registerLanguage(name, language);
}

const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
const escape = (text) => text.replace(/[&<>"']/g, (c) => ESCAPES[c]);

const marked = new Marked({
  gfm: true,
  breaks: false,
  renderer: {
    html({ text }) {
      return escape(text); // raw HTML in an answer is shown, never made
    },
    image({ text }) {
      return escape(text || ""); // no remote images (the CSP would block them anyway): their words
    },
  },
});

const SAFE_URL = /^(?:https?:|mailto:)/i;
const purifier = DOMPurify();
purifier.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A") {
    const href = node.getAttribute("href") || "";
    if (!SAFE_URL.test(href)) node.removeAttribute("href");
    else {
      node.setAttribute("rel", "noopener noreferrer");
      node.setAttribute("target", "_blank");
    }
  }
});
const PURIFY = {
  RETURN_DOM_FRAGMENT: true,
  ALLOWED_URI_REGEXP: SAFE_URL,
  FORBID_TAGS: ["style", "form", "input", "button", "textarea", "select", "img", "svg", "math", "iframe"],
  FORBID_ATTR: ["style", "id"],
};

/** The fragment for `text` as Markdown, sanitised; code blocks highlighted, each with a Copy button. */
export function markdownFragment(text) {
  const fragment = purifier.sanitize(marked.parse(text || "", { async: false }), PURIFY);
  for (const code of fragment.querySelectorAll("pre > code")) decorate(code);
  for (const table of fragment.querySelectorAll("table")) {
    const scroll = document.createElement("div");
    scroll.className = "table-scroll";
    table.replaceWith(scroll);
    scroll.append(table);
  }
  return fragment;
}

function decorate(code) {
  const pre = code.parentElement;
  const source = code.textContent;
  const named = /(?:^|\s)language-([\w+-]+)/.exec(code.getAttribute("class") || "");
  const language = named && hljs.getLanguage(named[1]) ? named[1] : null;
  const result = language ? hljs.highlight(source, { language, ignoreIllegals: true }) : null;
  const lines = document.createElement("code");
  if (result) {
    // highlight.js escapes the source itself; its markup is spans with hljs-* classes, sanitised again.
    lines.append(purifier.sanitize(result.value, { RETURN_DOM_FRAGMENT: true, ALLOWED_TAGS: ["span"], ALLOWED_ATTR: ["class"] }));
    lines.className = `hljs language-${language}`;
  } else {
    lines.textContent = source;
  }
  code.replaceWith(lines);
  const block = document.createElement("div");
  block.className = "codeblock";
  const head = document.createElement("div");
  head.className = "codeblock-head";
  const label = document.createElement("span");
  label.textContent = named ? named[1] : "code";
  const copy = document.createElement("button");
  copy.type = "button";
  copy.className = "copy quiet";
  copy.textContent = "Copy";
  copy.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(source);
      copy.textContent = "Copied";
    } catch {
      copy.textContent = "Select and copy";
    }
    setTimeout(() => { copy.textContent = "Copy"; }, 2000);
  });
  head.append(label, copy);
  pre.replaceWith(block);
  block.append(head, pre);
}

/** Render `text` into `target` (replacing what it held). */
export function renderMarkdown(target, text) {
  target.replaceChildren(markdownFragment(text));
}
