// How the chat page shows a tool's result: a view per tool (hits, grep
// lines, lists, a folder tree, a metadata card, an excerpt, a table, a web
// page preview, search links, a failure with its hint), with the raw JSON
// one click away; and the document viewer that hits, grep lines, listed
// documents and citations open.
//
// Like the rest of the page, everything from a tool reaches the DOM as text
// (textContent, text nodes); the only links are http(s) URLs.
"use strict";

const Views = (() => {
  // Longest passage or excerpt shown in a card; the viewer shows the rest.
  const PASSAGE_CHARS = 700;
  const EXCERPT_CHARS = 3000;
  const PREVIEW_CHARS = 2500;
  // Characters the viewer reads per page, and how many of them come before
  // a cited span.
  const PAGE_CHARS = 6000;
  const LEAD_CHARS = 1500;

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  const chars = (text) => Array.from(text || "");

  function cut(text, max) {
    const all = chars(text);
    return all.length > max ? all.slice(0, max).join("") + "…" : all.join("");
  }

  function size(bytes) {
    if (typeof bytes !== "number") return "";
    if (bytes < 1024) return bytes + " B";
    if (bytes < 1024 * 1024) return (bytes / 1024).toFixed(1) + " KB";
    return (bytes / 1024 / 1024).toFixed(1) + " MB";
  }

  function date(value) {
    if (!value) return "";
    const d = new Date(value);
    return Number.isNaN(d.getTime()) ? String(value) : d.toISOString().slice(0, 16).replace("T", " ");
  }

  const count = (n, one, many) => n + " " + (n === 1 ? one : many || one + "s");

  // ---- marking the query's words -----------------------------------------------

  const STOP = new Set(
    "a an and are as at be by can do does for from has have how i if in is it its of on or that the this to was what when where which who why with you your".split(
      " ",
    ),
  );

  // A pattern for the query's words (each as a word's start, so "vacuum"
  // marks "vacuuming"), or null when it has none worth marking.
  function wordsOf(query) {
    if (typeof query !== "string") return null;
    const words = [...new Set(query.toLowerCase().match(/[\p{L}\p{N}]{2,}/gu) || [])]
      .filter((w) => !STOP.has(w))
      .slice(0, 24)
      .map((w) => w.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
    if (words.length === 0) return null;
    return new RegExp("(?<![\\p{L}\\p{N}])(?:" + words.join("|") + ")[\\p{L}\\p{N}]*", "giu");
  }

  // `text` into `parent`, with what `pattern` matches in <mark>.
  function marked(parent, text, pattern) {
    if (!pattern) {
      parent.append(text);
      return parent;
    }
    let at = 0;
    for (const m of text.matchAll(pattern)) {
      parent.append(text.slice(at, m.index), el("mark", "", m[0]));
      at = m.index + m[0].length;
    }
    parent.append(text.slice(at));
    return parent;
  }

  // `text` with the code-point ranges [from, to) in <mark>.
  function markedRanges(parent, text, ranges) {
    const all = chars(text);
    let at = 0;
    for (const [from, to] of ranges) {
      const a = Math.max(at, Math.min(all.length, from));
      const b = Math.max(a, Math.min(all.length, to));
      parent.append(all.slice(at, a).join(""));
      if (b > a) parent.append(el("mark", "", all.slice(a, b).join("")));
      at = b;
    }
    parent.append(all.slice(at).join(""));
    return parent;
  }

  // ---- pieces ------------------------------------------------------------------

  // A button that opens a document in the viewer.
  function opener(ctx, label, doc) {
    const button = el("button", "doc-open", label);
    button.type = "button";
    button.addEventListener("click", () => ctx.openDocument({ ...doc, opener: button }));
    return button;
  }

  function note(text) {
    return el("p", "view-note", text);
  }

  function webLink(url, text) {
    const href = Markdown.safeHref(String(url || ""));
    if (!href) return el("span", "", text || url);
    const a = el("a", "", text || url);
    a.href = href;
    a.target = "_blank";
    a.rel = "noopener noreferrer nofollow";
    return a;
  }

  function metaLine(parts) {
    return el("p", "view-meta", parts.filter((p) => p !== "" && p !== null && p !== undefined).join(" · "));
  }

  function definitions(rows) {
    const dl = el("dl", "view-card");
    for (const [term, value] of rows) {
      if (value === null || value === undefined || value === "") continue;
      dl.append(el("dt", "", term));
      const dd = el("dd");
      if (value instanceof Node) dd.append(value);
      else dd.textContent = String(value);
      dl.append(dd);
    }
    return dl;
  }

  function cell(value) {
    const td = el("td");
    if (value === null || value === undefined) {
      td.className = "null";
      td.textContent = "NULL";
    } else if (typeof value === "object") {
      td.textContent = JSON.stringify(value);
    } else {
      td.textContent = String(value);
    }
    if (typeof value === "number") td.className = "number";
    return td;
  }

  function table(columns, rows) {
    const wrap = el("div", "table-wrap");
    const t = el("table");
    const head = el("tr");
    for (const c of columns) {
      const th = el("th", "", c.name);
      th.scope = "col";
      if (c.type) th.title = c.type;
      head.append(th);
    }
    const thead = el("thead");
    thead.append(head);
    const tbody = el("tbody");
    for (const row of rows) {
      const tr = el("tr");
      for (let i = 0; i < columns.length; i += 1) tr.append(cell(row[i]));
      tbody.append(tr);
    }
    t.append(thead, tbody);
    wrap.append(t);
    return wrap;
  }

  // ---- the views -------------------------------------------------------------------

  function searchDocuments(data, args, ctx) {
    const box = el("div", "view view-search");
    const hits = data.results || [];
    box.append(
      metaLine([
        count(hits.length, "passage"),
        data.mode ? data.mode + " search" : "",
        data.timings && typeof data.timings.total_ms === "number" ? Math.round(data.timings.total_ms) + " ms" : "",
        data.rerank && data.rerank.applied ? "reranked" + (data.rerank.model ? " by " + data.rerank.model : "") : "",
      ]),
    );
    if (data.note) box.append(note(data.note));
    // A reranker that failed leaves the fused order; the reader is told why.
    if (data.rerank && !data.rerank.applied && data.rerank.error) box.append(note("Not reranked: " + data.rerank.error));
    const pattern = wordsOf(data.query || args.query);
    const list = el("ol", "hits");
    for (const hit of hits) {
      const li = el("li", "hit");
      const head = el("div", "hit-head");
      head.append(
        opener(ctx, hit.name || hit.path, {
          document_id: hit.document_id,
          start: hit.char_start,
          end: hit.char_end,
          label: hit.path,
        }),
      );
      if (typeof hit.cite === "number") head.append(el("span", "badge cite-badge", "[" + hit.cite + "]"));
      li.append(head);
      li.append(
        metaLine([
          hit.path !== hit.name ? hit.path : "",
          hit.heading,
          typeof hit.page === "number" ? "page " + hit.page : "",
        ]),
      );
      li.append(marked(el("p", "hit-text"), cut(hit.text, PASSAGE_CHARS), pattern));
      const found = el("p", "hit-found");
      found.append("found by ");
      (hit.found_by || []).forEach((f, i) => {
        if (i > 0) found.append(", ");
        found.append(el("span", "badge", f.retriever + " #" + f.rank));
      });
      if (hit.rerank && typeof hit.rerank.score === "number") {
        if ((hit.found_by || []).length > 0) found.append(" · ");
        found.append(el("span", "badge", "rerank " + hit.rerank.score.toFixed(3) + " (fused #" + hit.rerank.fused_rank + ")"));
      }
      if ((hit.found_by || []).length > 0 || hit.rerank) li.append(found);
      list.append(li);
    }
    box.append(list);
    return box;
  }

  function grepDocuments(data, args, ctx) {
    const box = el("div", "view view-grep");
    const results = data.results || [];
    box.append(
      metaLine([
        count(results.length, "matching line"),
        typeof data.documents_searched === "number" ? count(data.documents_searched, "document") + " searched" : "",
      ]),
    );
    let group = null;
    let lines = null;
    // The lines shown in this document's group, by number: neighbouring
    // matches share context lines, which show once, and a match that was
    // context of the one before takes its place.
    let shown = new Map();
    const context = (number, text) => {
      if (shown.has(number)) return;
      const li = grepLine(number, text);
      shown.set(number, li);
      lines.append(li);
    };
    for (const r of results) {
      if (!group || group.dataset.documentId !== r.document_id) {
        group = el("section", "grep-file");
        group.dataset.documentId = r.document_id;
        group.append(opener(ctx, r.path, { document_id: r.document_id, start: 0, end: 0, label: r.path }));
        lines = el("ol", "grep-lines");
        group.append(lines);
        box.append(group);
        shown = new Map();
      }
      const before = r.before || [];
      before.forEach((text, k) => context(r.line - before.length + k, text));
      const first = (r.matches || [])[0];
      const row = el("li", "grep-line match");
      const button = el("button", "grep-open");
      button.type = "button";
      button.append(el("span", "line-no", r.line));
      const text = el("span", "line-text");
      if (r.trimmed && r.trimmed.chars_before > 0) text.append("…");
      const start = r.text_start || 0;
      markedRanges(
        text,
        r.text,
        (r.matches || []).map((m) => [m.char_start - start, m.char_end - start]),
      );
      if (r.trimmed && r.trimmed.chars_after > 0) text.append("…");
      button.append(text);
      button.setAttribute("aria-label", "Line " + r.line + " of " + r.path + ": " + r.text);
      button.addEventListener("click", () =>
        ctx.openDocument({
          document_id: r.document_id,
          start: first ? first.char_start : start,
          end: first ? first.char_end : start,
          label: r.path,
          opener: button,
        }),
      );
      row.append(button);
      const earlier = shown.get(r.line);
      if (earlier) earlier.replaceWith(row);
      else lines.append(row);
      shown.set(r.line, row);
      (r.after || []).forEach((t, k) => context(r.line + 1 + k, t));
    }
    if (data.more && data.more.hint) box.append(note(data.more.hint));
    return box;
  }

  function grepLine(number, text) {
    const li = el("li", "grep-line");
    li.append(el("span", "line-no", number), el("span", "line-text", text));
    return li;
  }

  function documentList(documents, ctx) {
    const list = el("ul", "doc-list");
    for (const d of documents) {
      const li = el("li");
      li.append(opener(ctx, d.path || d.name, { document_id: d.document_id, start: 0, end: 0, label: d.path }));
      li.append(metaLine([d.title, d.source, d.mime, size(d.size_bytes), d.updated_at ? "updated " + date(d.updated_at) : ""]));
      list.append(li);
    }
    return list;
  }

  function findByName(data, args, ctx) {
    const box = el("div", "view view-docs");
    const documents = data.documents || [];
    box.append(metaLine([count(documents.length, "document") + (args.pattern ? " matching " + args.pattern : "")]));
    box.append(documentList(documents, ctx));
    if (data.more && data.more.hint) box.append(note(data.more.hint));
    return box;
  }

  function listSources(data) {
    const box = el("div", "view view-sources");
    const sources = data.sources || [];
    box.append(metaLine([count(sources.length, "source")]));
    box.append(
      table(
        [{ name: "source" }, { name: "kind" }, { name: "documents" }, { name: "folders" }, { name: "size" }],
        sources.map((s) => [s.name, s.kind, s.documents, s.folders, size(s.bytes)]),
      ),
    );
    return box;
  }

  function listFolderContents(data, args, ctx) {
    const box = el("div", "view view-folder");
    const where = (data.source || "") + ":/" + (data.path || "").replace(/^\/+/, "");
    box.append(
      metaLine([
        where,
        count(data.total_folders ?? (data.folders || []).length, "folder"),
        count(data.total_documents ?? (data.documents || []).length, "document"),
      ]),
    );
    const list = el("ul", "doc-list");
    for (const f of data.folders || []) {
      const li = el("li", "folder");
      li.append(el("span", "folder-name", f.name + "/"));
      li.append(metaLine([count(f.documents, "document"), count(f.folders, "folder")]));
      list.append(li);
    }
    box.append(list);
    box.append(documentList(data.documents || [], ctx));
    if (typeof data.next_offset === "number") {
      box.append(note("More entries from offset " + data.next_offset + " (of " + data.total + ")."));
    }
    return box;
  }

  function treeNode(node, depth) {
    const label = node.name + "/ — " + count(node.total_documents ?? node.documents, "document");
    const children = node.children || [];
    if (children.length === 0) {
      const leaf = el("li", "tree-leaf", label);
      if (node.cut) leaf.append(el("span", "view-meta", " (" + node.cut + ")"));
      return leaf;
    }
    const li = el("li");
    const details = el("details", "tree-node");
    details.open = depth < 2;
    details.append(el("summary", "", label));
    const ul = el("ul", "tree");
    for (const child of children) ul.append(treeNode(child, depth + 1));
    if (node.hidden_folders > 0) ul.append(el("li", "view-meta", count(node.hidden_folders, "more folder")));
    details.append(ul);
    li.append(details);
    return li;
  }

  function folderTree(data) {
    const box = el("div", "view view-tree");
    box.append(metaLine([data.source, count(data.total_folders ?? 0, "folder"), "depth " + data.max_depth]));
    if (data.note) box.append(note(data.note));
    const root = el("ul", "tree");
    if (data.tree) root.append(treeNode({ ...data.tree, name: data.tree.name || data.source || "/" }, 0));
    box.append(root);
    return box;
  }

  function documentInfo(data, args, ctx) {
    const box = el("div", "view view-info");
    const head = el("div", "hit-head");
    head.append(opener(ctx, data.title || data.name || data.path, { document_id: data.document_id, start: 0, end: 0, label: data.path }));
    box.append(head);
    const rows = [
      ["Path", data.path],
      ["Source", data.source],
      ["Type", data.mime],
      ["Size", size(data.size_bytes)],
      ["Language", data.language],
      ["Passages", data.chunks],
      ["Version", data.version],
      ["Ingested", date(data.ingested_at)],
      ["Updated", date(data.updated_at)],
    ];
    // The extracted metadata, less what is empty or shown above; headings
    // by their text.
    const meta = data.metadata && typeof data.metadata === "object" ? data.metadata : {};
    const shown = new Set(["title", "language", "char_count"]);
    for (const [key, value] of Object.entries(meta)) {
      if (shown.has(key) || value === null || value === "" || (Array.isArray(value) && value.length === 0)) continue;
      let text = value;
      if (Array.isArray(value) && value.every((v) => v && typeof v === "object" && typeof v.text === "string")) {
        text = value.map((v) => v.text).join(" · ");
      } else if (typeof value === "object") {
        text = JSON.stringify(value);
      }
      rows.push([key.replace(/_/g, " "), text]);
    }
    box.append(definitions(rows));
    return box;
  }

  function readDocument(data, args, ctx) {
    const box = el("div", "view view-read");
    const head = el("div", "hit-head");
    head.append(opener(ctx, data.title || data.path, { document_id: data.document_id, start: data.start, end: data.end, label: data.path }));
    if (typeof data.cite === "number") head.append(el("span", "badge cite-badge", "[" + data.cite + "]"));
    box.append(head);
    box.append(metaLine([data.path, "characters " + data.start + "–" + data.end + " of " + data.total_chars]));
    const excerpt = el("blockquote", "excerpt");
    if (data.start > 0) excerpt.append("…");
    excerpt.append(cut(data.text, EXCERPT_CHARS));
    if (data.end < data.total_chars) excerpt.append("…");
    box.append(excerpt);
    return box;
  }

  function queryDocuments(data) {
    const box = el("div", "view view-query");
    if (data.question) box.append(el("p", "view-question", data.question));
    const pre = el("pre", "sql");
    pre.append(el("code", "", data.sql || ""));
    box.append(pre);
    box.append(
      metaLine([count(data.row_count ?? (data.rows || []).length, "row"), data.truncated ? "more rows exist than are shown" : ""]),
    );
    box.append(table(data.columns || [], data.rows || []));
    if (data.note) box.append(note(data.note));
    return box;
  }

  function fetchWebPage(data) {
    const box = el("article", "view view-web");
    const meta = data.metadata || {};
    box.append(el("h4", "web-title", data.title || meta.title || data.final_url || data.url));
    const source = el("p", "view-meta");
    source.append(webLink(data.final_url || data.url));
    const about = [meta.site_name, meta.byline, meta.published_time ? date(meta.published_time) : ""].filter(Boolean);
    if (about.length) source.append(" · " + about.join(" · "));
    box.append(source);
    if (data.untrusted) box.append(el("p", "web-notice", "Content from the web: read it as a claim, not an instruction."));
    // The page's text (Markdown, as the extractor writes it), drawn by the
    // same safe renderer as answers, without the frame the model reads.
    const preview = el("div", "web-content markdown");
    preview.append(Markdown.render(cut(unframed(data.content), PREVIEW_CHARS)));
    box.append(preview);
    box.append(
      metaLine([
        "characters " + data.start + "–" + data.end + " of " + data.total_chars,
        typeof data.links_total === "number" ? count(data.links_total, "link") : "",
      ]),
    );
    return box;
  }

  // Fetched content without the notice and markers that frame it for the
  // model (crates/web/src/fetch/window.rs).
  function unframed(content) {
    let text = String(content || "");
    const begin = text.indexOf("<<<UNTRUSTED_WEB_CONTENT");
    if (begin >= 0) {
      const close = text.indexOf(">>>", begin);
      if (close >= 0) text = text.slice(close + 3);
    }
    const end = text.lastIndexOf("<<<END_UNTRUSTED_WEB_CONTENT>>>");
    if (end >= 0) text = text.slice(0, end);
    return text.trim();
  }

  function webSearch(data) {
    const box = el("div", "view view-websearch");
    const results = data.results || [];
    box.append(metaLine([count(results.length, "result"), data.provider ? "from " + data.provider : ""]));
    const list = el("ol", "web-results");
    for (const r of results) {
      const li = el("li");
      const title = el("p", "web-result-title");
      title.append(webLink(r.url, r.title || r.url));
      li.append(title);
      let host = "";
      try {
        host = new URL(r.url).host;
      } catch (_) {
        host = r.url;
      }
      li.append(metaLine([host, r.published]));
      if (r.snippet) li.append(el("p", "web-snippet", r.snippet));
      list.append(li);
    }
    box.append(list);
    return box;
  }

  function analyzeDocument(data) {
    const box = el("div", "view view-analysis");
    const answer = el("div", "markdown");
    answer.append(Markdown.render(data.analysis || ""));
    box.append(answer);
    box.append(
      metaLine([
        count(data.steps ?? 0, "step"),
        typeof data.total_tokens === "number" ? data.total_tokens + " tokens" : "",
        data.finish_reason && data.finish_reason !== "stop" ? "cut short: " + data.finish_reason : "",
      ]),
    );
    if (data.note) box.append(note(data.note));
    return box;
  }

  const VIEWS = {
    search_documents: searchDocuments,
    grep_documents: grepDocuments,
    find_by_name: findByName,
    list_sources: listSources,
    list_folder_contents: listFolderContents,
    folder_tree: folderTree,
    document_info: documentInfo,
    read_document: readDocument,
    query_documents: queryDocuments,
    fetch_web_page: fetchWebPage,
    web_search: webSearch,
    analyze_document: analyzeDocument,
  };

  // What to do about a failure, by its code.
  const HINTS = {
    invalid_arguments: "The arguments did not fit the tool; the assistant can write them again.",
    not_found: "Nothing by that id or path in the spaces you can read.",
    permission_denied: "Your role does not allow this tool here.",
    not_available: "The tool is switched off or not set up on this server.",
    unknown_tool: "The server has no tool by that name.",
    rate_limited: "Too many calls for now; it can be tried again shortly.",
    timeout: "It took too long; a narrower request may fit.",
    unavailable: "A service it needs did not answer; it can be tried again.",
    approval_required: "It needs a person's approval, which nobody could give here.",
    blocked: "The server's policy refused this call.",
    module_error: "The remote tool module failed the call.",
    internal: "The server failed; the call can be tried again later.",
  };

  function failure(error) {
    const box = el("div", "view view-failure");
    const code = (error && error.code) || "error";
    box.append(el("p", "failure-title", "Failed: " + code.replace(/_/g, " ")));
    if (error && error.message) box.append(el("p", "failure-message", error.message));
    const hint = HINTS[code];
    if (hint) box.append(el("p", "failure-hint", hint + (error && error.retryable ? " (retryable)" : "")));
    return box;
  }

  // The view of one result, or null for tools without one (the raw JSON is
  // all there is). A view that cannot read the data (a newer server's
  // shape) falls back to null rather than break the card.
  function render(tool, result, args, ctx) {
    if (!result || result.success !== true) return failure(result && result.error);
    // Remote tools (module.tool) and the discovery meta-tools have none.
    const make = Object.hasOwn(VIEWS, tool) ? VIEWS[tool] : null;
    if (!make || !result.data || typeof result.data !== "object") return null;
    try {
      return make(result.data, args && typeof args === "object" ? args : {}, ctx);
    } catch (error) {
      console.warn("no view for this " + tool + " result:", error);
      return null;
    }
  }

  // ---- the document viewer -------------------------------------------------------

  // One <dialog> for the page: read_document pages of PAGE_CHARS, the cited
  // span marked and scrolled to, Earlier and Later for the pages around it.
  class Viewer {
    constructor(dialog, read) {
      this.dialog = dialog;
      this.read = read; // (documentId, start, maxLength) => read_document's data
      this.title = dialog.querySelector(".viewer-title");
      this.where = dialog.querySelector(".viewer-where");
      this.body = dialog.querySelector(".viewer-text");
      this.earlier = dialog.querySelector(".viewer-earlier");
      this.later = dialog.querySelector(".viewer-later");
      this.status = dialog.querySelector(".viewer-status");
      dialog.querySelector(".viewer-close").addEventListener("click", () => dialog.close());
      this.earlier.addEventListener("click", () => this.page(Math.max(0, this.start - PAGE_CHARS), false, this.earlier));
      this.later.addEventListener("click", () => this.page(this.end, false, this.later));
      dialog.addEventListener("close", () => this.giveFocusBack());
      // A click on the backdrop closes it.
      dialog.addEventListener("click", (e) => {
        if (e.target === dialog) dialog.close();
      });
    }

    // doc: { document_id, start, end, label, opener }
    async open(doc) {
      this.doc = doc;
      this.opener = doc.opener || document.activeElement;
      this.title.textContent = doc.label || "Document";
      this.where.textContent = "";
      this.body.textContent = "";
      if (!this.dialog.open) this.dialog.showModal();
      const from = Math.max(0, (doc.start || 0) - (doc.end > doc.start ? LEAD_CHARS : 0));
      await this.page(from, true);
    }

    // Focus goes back to what opened the viewer; when a streaming answer
    // was drawn again meanwhile, to its new copy (same data-focus-key).
    giveFocusBack() {
      let target = this.opener;
      if (target && !target.isConnected && target.dataset && target.dataset.focusKey) {
        target = document.querySelector(`[data-focus-key="${CSS.escape(target.dataset.focusKey)}"]`);
      }
      if (target && target.isConnected) target.focus();
      else document.getElementById("message")?.focus();
    }

    // Reads the page at `start`. The focus stays on the paging button that
    // asked (or moves to the other one when it has nothing more), else goes
    // to the text.
    async page(start, toSpan, via) {
      const doc = this.doc;
      this.status.textContent = "Reading…";
      this.earlier.disabled = true;
      this.later.disabled = true;
      let data;
      try {
        data = await this.read(doc.document_id, start, PAGE_CHARS);
      } catch (error) {
        this.status.textContent = "The document could not be read: " + error.message;
        // Let the reader try again.
        this.earlier.disabled = (this.start ?? 0) <= 0;
        this.later.disabled = false;
        (via || this.dialog.querySelector(".viewer-close")).focus();
        return;
      }
      if (this.doc !== doc) return; // another document was opened meanwhile
      this.start = data.start;
      this.end = data.end;
      this.title.textContent = data.title || data.path || doc.label || "Document";
      this.where.textContent = (data.path || "") + " — characters " + data.start + "–" + data.end + " of " + data.total_chars;
      this.body.textContent = "";
      const span = doc.end > doc.start ? [[doc.start - data.start, doc.end - data.start]] : [];
      markedRanges(this.body, data.text || "", span);
      this.earlier.disabled = data.start <= 0;
      this.later.disabled = data.end >= data.total_chars;
      this.status.textContent = "";
      const mark = this.body.querySelector("mark");
      if (toSpan && mark && mark.textContent) {
        mark.scrollIntoView({ block: "center" });
      } else {
        this.body.scrollTop = 0;
      }
      const other = via === this.earlier ? this.later : this.earlier;
      if (via && !via.disabled) via.focus();
      else if (via && !other.disabled) other.focus();
      else this.body.focus({ preventScroll: true });
    }
  }

  return { render, Viewer, markedRanges };
})();
