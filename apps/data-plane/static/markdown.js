// A Markdown renderer for the model's answers that builds DOM nodes and
// never HTML: every piece of model text reaches the page as a text node, so
// markup in an answer stays visible text and no element, attribute or
// script can come from it. Links are made only for http(s) URLs, open in a
// new tab with rel="noopener noreferrer nofollow"; images become links.
//
// What it reads: ATX headings, paragraphs, emphasis (* _ ** __ ~~), code
// spans and fenced code blocks (with a Copy button), bullet and numbered
// lists (nested by indentation), block quotes, thematic breaks, pipe
// tables, links, autolinks and bare URLs, backslash escapes, and citation
// markers ([3], [1, 4], [^2]) handed to a callback. Raw HTML is text.
//
// Renders a whole text each time it is called; the chat page calls it at
// most once per animation frame while an answer streams, so a half-written
// construct (an unclosed ** or code fence) shows as it stands and settles
// when the rest arrives.
"use strict";

const Markdown = (() => {
  // Nesting deeper than this is shown flat: no input can exhaust the stack.
  const MAX_DEPTH = 8;

  // Block patterns only match a line's opening; what follows is read by
  // code, so no pattern can backtrack across a long line.
  const FENCE_OPEN = /^ {0,3}(`{3,}|~{3,})/;
  const HEADING_OPEN = /^ {0,3}(#{1,6})(?=[ \t]|$)/;
  const RULE = /^ {0,3}(?:(?:-[ \t]*){3,}|(?:\*[ \t]*){3,}|(?:_[ \t]*){3,})$/;
  const QUOTE = /^ {0,3}> ?(.*)$/;
  const ITEM = /^( *)([-*+]|\d{1,9}[.)])(?:[ \t]+(.*)|[ \t]*$)/;
  const BLANK = /^[ \t]*$/;

  function el(tag, className) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    return node;
  }

  // The URL as a link target when it is an absolute http(s) URL; null
  // otherwise (javascript:, data:, relative, malformed).
  function safeHref(raw) {
    if (!/^https?:\/\//i.test(raw)) return null;
    try {
      const url = new URL(raw);
      return url.protocol === "http:" || url.protocol === "https:" ? url.href : null;
    } catch (_) {
      return null;
    }
  }

  function link(href, title) {
    const a = el("a");
    a.href = href;
    a.target = "_blank";
    a.rel = "noopener noreferrer nofollow";
    if (title) a.title = title;
    return a;
  }

  const indentOf = (line) => line.length - line.trimStart().length;

  // A fence's opening: its marker and the info string's first word; a
  // backtick fence's info string may hold no backtick.
  function fenceOpen(line) {
    const m = FENCE_OPEN.exec(line);
    if (!m) return null;
    const info = line.slice(m[0].length).trim();
    if (m[1][0] === "`" && info.includes("`")) return null;
    return { marker: m[1], language: info.split(/\s/, 1)[0] };
  }

  // A heading's level and text, without the closing #s.
  function headingOf(line) {
    const m = HEADING_OPEN.exec(line);
    if (!m) return null;
    let text = line.slice(m[0].length).trim();
    const closing = /(?:^|[ \t])#+$/.exec(text);
    if (closing) text = text.slice(0, closing.index).trimEnd();
    return { level: m[1].length, text };
  }

  // A table's delimiter row: cells of dashes, each with an optional colon
  // at either end.
  function tableRule(line) {
    const row = cells(line);
    return line.includes("-") && line.includes("|") && row.length > 0 && row.every((cell) => /^:?-+:?$/.test(cell));
  }

  function startsBlock(line) {
    return fenceOpen(line) !== null || headingOf(line) !== null || RULE.test(line) || QUOTE.test(line) || ITEM.test(line);
  }

  // ---- blocks ----------------------------------------------------------------

  function blocks(lines, parent, options, depth) {
    let paragraph = [];
    const flush = () => {
      if (paragraph.length === 0) return;
      const p = el("p");
      inline(paragraph.join("\n"), p, options, depth);
      parent.append(p);
      paragraph = [];
    };
    let i = 0;
    while (i < lines.length) {
      const line = lines[i];
      let m;
      if (BLANK.test(line)) {
        flush();
        i += 1;
      } else if (depth >= MAX_DEPTH) {
        paragraph.push(line);
        i += 1;
      } else if ((m = fenceOpen(line))) {
        flush();
        i = fence(lines, i, m, parent);
      } else if ((m = headingOf(line))) {
        flush();
        const h = el("h" + Math.min(6, m.level + 2));
        inline(m.text, h, options, depth);
        parent.append(h);
        i += 1;
      } else if (RULE.test(line)) {
        flush();
        parent.append(el("hr"));
        i += 1;
      } else if (QUOTE.test(line)) {
        flush();
        const inner = [];
        while (i < lines.length && (m = QUOTE.exec(lines[i]))) {
          inner.push(m[1]);
          i += 1;
        }
        const quote = el("blockquote");
        blocks(inner, quote, options, depth + 1);
        parent.append(quote);
      } else if (ITEM.test(line)) {
        flush();
        i = list(lines, i, parent, options, depth);
      } else if (line.includes("|") && i + 1 < lines.length && tableRule(lines[i + 1])) {
        flush();
        i = table(lines, i, parent, options, depth);
      } else {
        paragraph.push(line);
        i += 1;
      }
    }
    flush();
  }

  function fence(lines, i, open, parent) {
    const marker = open.marker;
    const closing = new RegExp("^ {0,3}" + marker[0] + "{" + marker.length + ",}[ \\t]*$");
    const code = [];
    let j = i + 1;
    while (j < lines.length && !closing.test(lines[j])) {
      code.push(lines[j]);
      j += 1;
    }
    parent.append(codeBlock(code.join("\n"), open.language));
    return j < lines.length ? j + 1 : j;
  }

  function codeBlock(text, language) {
    const box = el("div", "code-block");
    const head = el("div", "code-head");
    const lang = el("span", "code-lang");
    lang.textContent = language || "code";
    const copy = el("button", "code-copy");
    copy.type = "button";
    copy.textContent = "Copy";
    copy.setAttribute("aria-label", "Copy the code" + (language ? " (" + language + ")" : ""));
    copy.addEventListener("click", () => copyText(text, copy));
    head.append(lang, copy);
    const pre = el("pre");
    const code = el("code");
    code.textContent = text;
    pre.append(code);
    box.append(head, pre);
    return box;
  }

  async function copyText(text, button) {
    let done = false;
    try {
      await navigator.clipboard.writeText(text);
      done = true;
    } catch (_) {
      // No clipboard API here (an insecure origin): the selection's copy.
      const area = el("textarea", "visually-hidden");
      area.value = text;
      document.body.append(area);
      area.select();
      try {
        done = document.execCommand("copy");
      } catch (_) {
        done = false;
      }
      area.remove();
      button.focus();
    }
    button.textContent = done ? "Copied" : "Copy failed";
    setTimeout(() => {
      button.textContent = "Copy";
    }, 1500);
  }

  function list(lines, i, parent, options, depth) {
    const first = ITEM.exec(lines[i]);
    const indent = first[1].length;
    const ordered = /\d/.test(first[2]);
    const node = el(ordered ? "ol" : "ul");
    if (ordered) {
      const start = parseInt(first[2], 10);
      if (start !== 1) node.start = start;
    }
    let body = null;
    let contentIndent = 0;
    const close = () => {
      if (!body) return;
      const li = el("li");
      blocks(body, li, options, depth + 1);
      node.append(li);
    };
    while (i < lines.length) {
      const line = lines[i];
      const m = ITEM.exec(line);
      if (m && m[1].length >= indent && (!body || m[1].length < contentIndent)) {
        if (/\d/.test(m[2]) !== ordered) break; // another kind of list
        close();
        body = [m[3] || ""];
        contentIndent = m[1].length + m[2].length + 1;
        i += 1;
        continue;
      }
      if (BLANK.test(line)) {
        // The list goes on past blank lines when what follows belongs to it.
        let j = i + 1;
        while (j < lines.length && BLANK.test(lines[j])) j += 1;
        if (j < lines.length && indentOf(lines[j]) > indent) {
          for (; i < j; i += 1) body.push("");
          continue;
        }
        const next = j < lines.length ? ITEM.exec(lines[j]) : null;
        if (next && next[1].length === indent && /\d/.test(next[2]) === ordered) {
          for (; i < j; i += 1) body.push("");
          continue;
        }
        break;
      }
      const own = indentOf(line);
      if (own > indent) {
        body.push(line.slice(Math.min(own, contentIndent)));
        i += 1;
        continue;
      }
      // A line that starts no block of its own continues the item's text.
      if (!m && !startsBlock(line) && body[body.length - 1] !== "") {
        body.push(line);
        i += 1;
        continue;
      }
      break;
    }
    close();
    parent.append(node);
    return i;
  }

  function cells(line) {
    let row = line.trim();
    if (row.startsWith("|")) row = row.slice(1);
    if (row.endsWith("|") && !row.endsWith("\\|")) row = row.slice(0, -1);
    return row.split(/(?<!\\)\|/).map((cell) => cell.trim().replace(/\\\|/g, "|"));
  }

  function table(lines, i, parent, options, depth) {
    const head = cells(lines[i]);
    const align = cells(lines[i + 1]).map((c) =>
      c.startsWith(":") && c.endsWith(":") ? "center" : c.endsWith(":") ? "right" : c.startsWith(":") ? "left" : "",
    );
    const wrap = el("div", "table-wrap");
    const tableNode = el("table");
    const thead = el("thead");
    const tr = el("tr");
    head.forEach((text, c) => {
      const th = el("th");
      th.scope = "col";
      if (align[c]) th.style.textAlign = align[c];
      inline(text, th, options, depth + 1);
      tr.append(th);
    });
    thead.append(tr);
    const tbody = el("tbody");
    let j = i + 2;
    while (j < lines.length && !BLANK.test(lines[j]) && lines[j].includes("|")) {
      const row = cells(lines[j]);
      const rowNode = el("tr");
      for (let c = 0; c < head.length; c += 1) {
        const td = el("td");
        if (align[c]) td.style.textAlign = align[c];
        inline(row[c] || "", td, options, depth + 1);
        rowNode.append(td);
      }
      tbody.append(rowNode);
      j += 1;
    }
    tableNode.append(thead, tbody);
    wrap.append(tableNode);
    parent.append(wrap);
    return j;
  }

  // ---- inlines ---------------------------------------------------------------

  // Tried in order where a character that can open them stands. Every
  // pattern looks a bounded distance ahead (1,000 characters for code
  // spans and emphasis, 2,000 for a URL), so a line full of unclosed
  // markers costs linear time, not quadratic.
  const INLINES = [
    { kind: "escape", opens: "\\", re: /\\([!-/:-@[-`{-~])/y },
    { kind: "code", opens: "`", re: /(`+)(?!`)([\s\S]{0,1000}?[^`])\1(?!`)/y },
    { kind: "image", opens: "!", re: /!\[([^\]\n]{0,500})\]\(\s*<?([^\s<>()]{1,2000})>?(?:\s+"([^"\n]{0,500})")?\s*\)/y },
    {
      kind: "link",
      opens: "[",
      re: /\[((?:[^[\]\n]|\[[^[\]\n]{0,200}\]){1,500})\]\(\s*<?((?:[^\s<>()]|\([^\s<>()]{0,200}\)){0,2000})>?(?:\s+"([^"\n]{0,500})")?\s*\)/y,
    },
    { kind: "cite", opens: "[", re: /\[\^?\d{1,4}(?:\s*,\s*\^?\d{1,4})*\]/y },
    { kind: "autolink", opens: "<", re: /<(https?:\/\/[^\s<>]{1,2000})>/y },
    { kind: "url", opens: "hH", re: /https?:\/\/(?:[^\s<>()[\]]|\([^\s<>()]{0,200}\)){0,2000}(?:[^\s<>()[\].,;:!?'"*_~]|\([^\s<>()]{0,200}\))/iy },
    { kind: "strongem", opens: "*", re: /\*\*\*(?=\S)([\s\S]{0,1000}?\S)\*\*\*/y },
    { kind: "strong", opens: "*", re: /\*\*(?=\S)([\s\S]{0,1000}?\S)\*\*/y },
    { kind: "strong", opens: "_", re: /__(?=\S)([\s\S]{0,1000}?\S)__(?![\p{L}\p{N}])/uy },
    { kind: "strike", opens: "~", re: /~~(?=\S)([\s\S]{0,1000}?\S)~~/y },
    { kind: "em", opens: "*", re: /\*(?=[^\s*])([\s\S]{0,1000}?[^\s*])\*(?!\*)/y },
    { kind: "em", opens: "_", re: /_(?=[^\s_])([\s\S]{0,1000}?[^\s_])_(?![\p{L}\p{N}])/uy },
  ];
  const SPECIAL = /[\\`![<hH*_~]/g;
  // Inside a link's text nothing links or cites again (no link in a link,
  // no button in a link).
  const LINKING = new Set(["image", "link", "cite", "autolink", "url"]);
  const inLink = { inLink: true };
  const WORD = /[\p{L}\p{N}_]/u;

  function inline(text, parent, options, depth) {
    let plain = "";
    let i = 0;
    const flush = () => {
      if (plain) parent.append(document.createTextNode(plain));
      plain = "";
    };
    while (i < text.length) {
      SPECIAL.lastIndex = i;
      const next = depth >= MAX_DEPTH ? null : SPECIAL.exec(text);
      if (!next) {
        plain += text.slice(i);
        break;
      }
      plain += text.slice(i, next.index);
      i = next.index;
      const c = text[i];
      // Inside a word, _ and a bare URL open nothing (snake_case, "xhttp").
      const inWord = i > 0 && WORD.test(text[i - 1]);
      let taken = false;
      for (const rule of INLINES) {
        if (!rule.opens.includes(c)) continue;
        if (options.inLink && LINKING.has(rule.kind)) continue;
        if (inWord && (c === "_" || rule.kind === "url")) continue;
        rule.re.lastIndex = i;
        const m = rule.re.exec(text);
        if (!m) continue;
        // Read before emit: drawing the inside runs the same (shared)
        // patterns again.
        const end = rule.re.lastIndex;
        flush();
        emit(rule.kind, m, parent, options, depth);
        i = end;
        taken = true;
        break;
      }
      if (!taken) {
        plain += c;
        i += 1;
      }
    }
    flush();
  }

  function emit(kind, m, parent, options, depth) {
    switch (kind) {
      case "escape":
        parent.append(document.createTextNode(m[1]));
        return;
      case "code": {
        const code = el("code");
        let body = m[2];
        if (body.length > 2 && body.startsWith(" ") && body.endsWith(" ")) body = body.slice(1, -1);
        code.textContent = body;
        parent.append(code);
        return;
      }
      case "image": {
        // Never loaded: a link to it, named by its description.
        const href = safeHref(m[2]);
        const label = m[1] || "image";
        if (!href) return parent.append(document.createTextNode(label));
        const a = link(href, m[3]);
        a.textContent = "[image: " + label + "]";
        parent.append(a);
        return;
      }
      case "link": {
        const href = safeHref(m[2]);
        if (!href) {
          // Not an http(s) link: its words, without a target.
          const span = el("span", "link-dropped");
          span.title = "not a web link, not followed";
          inline(m[1], span, inLink, depth + 1);
          parent.append(span);
          return;
        }
        const a = link(href, m[3]);
        inline(m[1], a, inLink, depth + 1);
        parent.append(a);
        return;
      }
      case "cite":
        return cite(m[0], parent, options);
      case "autolink":
      case "url": {
        const raw = kind === "autolink" ? m[1] : m[0];
        const href = safeHref(raw);
        if (!href) return parent.append(document.createTextNode(m[0]));
        const a = link(href);
        a.textContent = raw;
        parent.append(a);
        return;
      }
      case "strongem": {
        const strong = el("strong");
        const em = el("em");
        inline(m[1], em, options, depth + 1);
        strong.append(em);
        parent.append(strong);
        return;
      }
      default: {
        const node = el({ strong: "strong", em: "em", strike: "del" }[kind]);
        inline(m[1], node, options, depth + 1);
        parent.append(node);
      }
    }
  }

  // "[2]" becomes what options.cite(2, "[2]") makes of it; in "[1, 3]" each
  // number does. A number the page does not know (cite answers null) and
  // everything else stay as written.
  function cite(marker, parent, options) {
    const single = /^\[\^?(\d+)\]$/.exec(marker);
    const whole = single && options.cite ? options.cite(Number(single[1]), marker) : null;
    if (whole) return parent.append(whole);
    for (const part of marker.split(/(\d+)/)) {
      if (part === "") continue;
      const node = /^\d+$/.test(part) && options.cite ? options.cite(Number(part), part) : null;
      parent.append(node || document.createTextNode(part));
    }
  }

  // The nodes for `text`, as a fragment to put into a container.
  function render(text, options = {}) {
    const fragment = document.createDocumentFragment();
    const lines = String(text)
      .replace(/\r\n?/g, "\n")
      .split("\n")
      .map((line) => line.replace(/^\t+/, (tabs) => "    ".repeat(tabs.length)));
    blocks(lines, fragment, options, 0);
    return fragment;
  }

  return { render, safeHref };
})();
