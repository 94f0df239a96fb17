//! Finding the main content: prune what is never content, score paragraphs
//! into their ancestors, pick the best container and the siblings that
//! belong with it, then clean boilerplate out of the pick.
//!
//! When a pass keeps too little text the next one relaxes a rule (first
//! class-based pruning, then class weights, then conditional cleaning) and
//! the pass that kept most wins.

use crate::html::dom::{DEAD, Dom, folded_len, is_block, is_cjk};
use crate::html::math::is_formula;

/// The content a reader keeps: subtrees to render, and nodes inside them to skip.
pub(crate) struct Content {
    pub roots: Vec<usize>,
    pub removed: Vec<bool>,
    pub byline: Option<String>,
}

#[derive(Clone, Copy)]
struct Pass {
    strip_unlikely: bool,
    weight_classes: bool,
    clean: bool,
}

const PASSES: [Pass; 4] = [
    Pass {
        strip_unlikely: true,
        weight_classes: true,
        clean: true,
    },
    Pass {
        strip_unlikely: false,
        weight_classes: true,
        clean: true,
    },
    Pass {
        strip_unlikely: false,
        weight_classes: false,
        clean: true,
    },
    Pass {
        strip_unlikely: false,
        weight_classes: false,
        clean: false,
    },
];

/// A pass that keeps this many characters is good enough.
const ENOUGH_TEXT: usize = 500;
/// Shortest text that counts as a paragraph.
const MIN_PARAGRAPH: usize = 25;
/// How many ancestors a paragraph's score reaches.
const ANCESTOR_LEVELS: usize = 5;

pub(crate) fn find(dom: &Dom<'_>, title: Option<&str>) -> Content {
    let n = dom.len();
    let body = (0..n)
        .find(|&i| dom.tag(i) == "body")
        .or_else(|| (0..n).find(|&i| dom.tag(i) == "html"));
    let Some(body) = body else {
        return Content {
            roots: Vec::new(),
            removed: vec![false; n],
            byline: None,
        };
    };
    let mut best: Option<(usize, Content)> = None;
    for pass in PASSES {
        let content = attempt(dom, body, pass, title);
        let kept = kept_text_len(dom, &content);
        if kept >= ENOUGH_TEXT {
            return content;
        }
        if best.as_ref().is_none_or(|(len, _)| kept > *len) {
            best = Some((kept, content));
        }
    }
    match best {
        Some((_, content)) => content,
        None => Content {
            roots: vec![body],
            removed: vec![false; n],
            byline: None,
        },
    }
}

fn attempt(dom: &Dom<'_>, body: usize, pass: Pass, title: Option<&str>) -> Content {
    let n = dom.len();
    let mut removed = vec![false; n];
    let mut byline = None;

    let end = dom.end(body);
    let mut i = body + 1;
    while i < end {
        if dom.element(i).is_some() && prune(dom, i, pass, &mut byline) {
            removed[i] = true;
            i = dom.end(i);
        } else {
            i += 1;
        }
    }

    let score = score_paragraphs(dom, body, &removed, pass);
    let roots = match pick_top(dom, body, &score) {
        Some(top) => with_siblings(dom, top, &score, &removed),
        None => vec![body],
    };
    for &root in &roots {
        clean(dom, root, pass, &score, title, &mut removed);
    }
    Content {
        roots,
        removed,
        byline,
    }
}

/// Whether element `i` and its subtree are never content.
fn prune(dom: &Dom<'_>, i: usize, pass: Pass, byline: &mut Option<String>) -> bool {
    let tag = dom.tag(i);
    if (DEAD.contains(&tag) && !is_formula(dom, i)) || is_hidden(dom, i) {
        return true;
    }
    if byline.is_none() && is_byline(dom, i) {
        let text = dom.inner_text(i, 200);
        let len = text.chars().count();
        if len > 0 && len < 100 {
            *byline = Some(text);
            return true;
        }
    }
    if !pass.strip_unlikely {
        return false;
    }
    if matches!(tag, "nav" | "aside" | "footer") {
        return true;
    }
    if tag == "header" && dom.stats(i).text < 400 {
        return true;
    }
    if let Some(role) = dom.attr(i, "role") {
        let role = role.trim().to_ascii_lowercase();
        if matches!(
            role.as_str(),
            "menu"
                | "menubar"
                | "complementary"
                | "navigation"
                | "alert"
                | "alertdialog"
                | "dialog"
                | "banner"
                | "contentinfo"
                | "search"
        ) {
            return true;
        }
    }
    if matches!(
        tag,
        "html"
            | "body"
            | "a"
            | "article"
            | "main"
            | "table"
            | "tbody"
            | "tr"
            | "td"
            | "th"
            | "code"
            | "pre"
    ) {
        return false;
    }
    let hints = class_and_id(dom, i);
    !hints.is_empty()
        && is_unlikely(&hints)
        && !is_maybe(&hints)
        && !has_ancestor(dom, i, |t| matches!(t, "table" | "code" | "pre"))
}

fn is_hidden(dom: &Dom<'_>, i: usize) -> bool {
    if dom.attr(i, "hidden").is_some() {
        return true;
    }
    if dom
        .attr(i, "aria-hidden")
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
    {
        return true;
    }
    dom.attr(i, "style").is_some_and(|style| {
        let s: String = style
            .chars()
            .filter(|c| !c.is_ascii_whitespace())
            .collect::<String>()
            .to_ascii_lowercase();
        s.contains("display:none") || s.contains("visibility:hidden")
    })
}

fn is_byline(dom: &Dom<'_>, i: usize) -> bool {
    if dom
        .attr(i, "rel")
        .is_some_and(|r| r.eq_ignore_ascii_case("author"))
    {
        return true;
    }
    if dom
        .attr(i, "itemprop")
        .is_some_and(|p| p.to_ascii_lowercase().contains("author"))
    {
        return true;
    }
    let hints = class_and_id(dom, i);
    ["byline", "author", "dateline", "writtenby"]
        .iter()
        .any(|w| hints.contains(w))
}

/// Lowercased `class` and `id`, space-separated.
fn class_and_id(dom: &Dom<'_>, i: usize) -> String {
    let mut s = String::new();
    for name in ["class", "id"] {
        if let Some(v) = dom.attr(i, name) {
            s.push_str(&v.to_ascii_lowercase());
            s.push(' ');
        }
    }
    s
}

fn tokens(hints: &str) -> impl Iterator<Item = &str> {
    hints
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|t| !t.is_empty())
}

fn is_unlikely(hints: &str) -> bool {
    const PARTS: &[&str] = &[
        "banner",
        "breadcrumb",
        "combx",
        "comment",
        "community",
        "cover-wrap",
        "disqus",
        "extra",
        "footer",
        "gdpr",
        "header",
        "legends",
        "menu",
        "related",
        "remark",
        "replies",
        "rss",
        "shoutbox",
        "sidebar",
        "skyscraper",
        "social",
        "sponsor",
        "supplemental",
        "ad-break",
        "agegate",
        "pagination",
        "pager",
        "popup",
        "cookie",
        "newsletter",
        "promo",
        "subscribe",
    ];
    const WORDS: &[&str] = &["ad", "ads", "nav", "navbar", "share", "toolbar", "masthead"];
    PARTS.iter().any(|p| hints.contains(p)) || tokens(hints).any(|t| WORDS.contains(&t))
}

fn is_maybe(hints: &str) -> bool {
    const PARTS: &[&str] = &[
        "and", "article", "body", "column", "content", "main", "shadow", "mathjax", "story",
    ];
    PARTS.iter().any(|p| hints.contains(p))
}

/// Class and id hints: -25 for each that reads like boilerplate, +25 for
/// each that reads like content.
fn class_weight(dom: &Dom<'_>, i: usize) -> f64 {
    const NEG_PARTS: &[&str] = &[
        "comment",
        "combx",
        "footer",
        "masthead",
        "outbrain",
        "promo",
        "related",
        "scroll",
        "shoutbox",
        "sidebar",
        "skyscraper",
        "sponsor",
        "shopping",
        "widget",
        "banner",
        "advert",
        "taboola",
        "share",
        "social",
        "newsletter",
        "subscribe",
        "popup",
        "cookie",
        "gdpr",
        "-ad-",
        "signup",
        "sign-up",
        "login",
        "paywall",
        "regist",
    ];
    const NEG_WORDS: &[&str] = &[
        "ad", "ads", "hid", "hidden", "meta", "tags", "media", "contact", "nav", "menu", "com",
    ];
    const POS_PARTS: &[&str] = &[
        "article", "body", "content", "entry", "hentry", "main", "post", "text", "blog", "story",
        "prose",
    ];
    const POS_WORDS: &[&str] = &["page", "pagination"];
    let mut weight = 0.0;
    for name in ["class", "id"] {
        let Some(v) = dom.attr(i, name) else { continue };
        let v = v.to_ascii_lowercase();
        if v.trim().is_empty() {
            continue;
        }
        if NEG_PARTS.iter().any(|p| v.contains(p)) || tokens(&v).any(|t| NEG_WORDS.contains(&t)) {
            weight -= 25.0;
        }
        if POS_PARTS.iter().any(|p| v.contains(p)) || tokens(&v).any(|t| POS_WORDS.contains(&t)) {
            weight += 25.0;
        }
    }
    weight
}

fn base_score(dom: &Dom<'_>, i: usize) -> f64 {
    let mut s = match dom.tag(i) {
        "div" => 5.0,
        "pre" | "td" | "blockquote" => 3.0,
        "article" => 8.0,
        "main" => 5.0,
        "address" | "ol" | "ul" | "dl" | "dd" | "dt" | "li" | "form" => -3.0,
        "h1" | "h2" | "h3" | "h4" | "h5" | "h6" | "th" => -5.0,
        _ => 0.0,
    };
    if dom
        .attr(i, "role")
        .is_some_and(|r| r.eq_ignore_ascii_case("main"))
        || dom
            .attr(i, "itemprop")
            .is_some_and(|p| p.contains("articleBody"))
    {
        s += 10.0;
    }
    s
}

fn has_ancestor(dom: &Dom<'_>, i: usize, pred: impl Fn(&str) -> bool) -> bool {
    let mut p = dom.parent(i);
    while let Some(a) = p {
        if pred(dom.tag(a)) {
            return true;
        }
        p = dom.parent(a);
    }
    false
}

/// A block child, by the rule that turns a `<div>` into a paragraph.
fn has_block_child(dom: &Dom<'_>, i: usize) -> bool {
    dom.children(i).any(|c| {
        let t = dom.tag(c);
        t == "img" || is_block(t)
    })
}

/// Scores per node; NaN where a node is no candidate.
fn score_paragraphs(dom: &Dom<'_>, body: usize, removed: &[bool], pass: Pass) -> Vec<f64> {
    let mut score = vec![f64::NAN; dom.len()];
    let end = dom.end(body);
    let mut i = body + 1;
    while i < end {
        if removed[i] {
            i = dom.end(i);
            continue;
        }
        let tag = dom.tag(i);
        // (first ancestor to credit, text length, commas)
        let paragraph = match tag {
            "p" | "pre" | "td" | "h2" | "h3" | "h4" | "h5" | "h6" => {
                let st = dom.stats(i);
                dom.parent(i).map(|p| (p, st.text, st.commas))
            }
            "div" | "section" | "article" | "main" => {
                if has_block_child(dom, i) {
                    // Loose text beside the blocks is a paragraph of its own.
                    let (mut len, mut commas) = (0, 0);
                    for c in dom.children(i) {
                        if !is_block(dom.tag(c)) && !removed[c] {
                            let st = dom.stats(c);
                            len += st.text;
                            commas += st.commas;
                        }
                    }
                    Some((i, len, commas))
                } else {
                    let st = dom.stats(i);
                    dom.parent(i).map(|p| (p, st.text, st.commas))
                }
            }
            _ => None,
        };
        if let Some((first, len, commas)) = paragraph
            && len >= MIN_PARAGRAPH
        {
            let points = 1.0 + commas as f64 + (len / 100).min(3) as f64;
            let mut anc = Some(first);
            let mut level = 0;
            while let Some(a) = anc {
                if level >= ANCESTOR_LEVELS || dom.parent(a).is_none() || dom.tag(a) == "html" {
                    break;
                }
                if score[a].is_nan() {
                    score[a] = base_score(dom, a)
                        + if pass.weight_classes {
                            class_weight(dom, a)
                        } else {
                            0.0
                        };
                }
                let divider = match level {
                    0 => 1.0,
                    1 => 2.0,
                    l => l as f64 * 3.0,
                };
                score[a] += points / divider;
                anc = dom.parent(a);
                level += 1;
            }
        }
        i += 1;
    }
    for (i, s) in score.iter_mut().enumerate() {
        if !s.is_nan() {
            *s *= 1.0 - dom.stats(i).link_density();
        }
    }
    score
}

fn pick_top(dom: &Dom<'_>, body: usize, score: &[f64]) -> Option<usize> {
    let mut ranked: Vec<usize> = (0..score.len()).filter(|&i| !score[i].is_nan()).collect();
    ranked.sort_by(|&a, &b| score[b].total_cmp(&score[a]).then(a.cmp(&b)));
    let mut top = *ranked.first()?;
    if matches!(dom.tag(top), "body" | "html") {
        return None;
    }
    let top_score = score[top];

    // Several near-best candidates under one ancestor: the content is split
    // in parts and the ancestor holds them all.
    let near: Vec<usize> = ranked
        .iter()
        .skip(1)
        .take(5)
        .copied()
        .filter(|&c| score[c] >= top_score * 0.75)
        .collect();
    if near.len() >= 3 {
        let mut anc = dom.parent(top);
        while let Some(a) = anc {
            if a == body || matches!(dom.tag(a), "body" | "html") {
                break;
            }
            let inside = near.iter().filter(|&&c| c > a && c < dom.end(a)).count();
            if inside >= 3 {
                top = a;
                break;
            }
            anc = dom.parent(a);
        }
    }

    // A parent that scores better than its child is the better container.
    let mut last = if score[top].is_nan() {
        top_score
    } else {
        score[top]
    };
    let threshold = last / 3.0;
    let mut anc = dom.parent(top);
    while let Some(a) = anc {
        if matches!(dom.tag(a), "body" | "html") {
            break;
        }
        if !score[a].is_nan() {
            if score[a] < threshold {
                break;
            }
            if score[a] > last {
                top = a;
                break;
            }
            last = score[a];
        }
        anc = dom.parent(a);
    }

    // Climb out of wrappers that hold nothing else.
    while let Some(p) = dom.parent(top) {
        if matches!(dom.tag(p), "body" | "html") {
            break;
        }
        let only_child = dom
            .children(p)
            .filter(|&c| dom.element(c).is_some() || dom.stats(c).text > 0)
            .count()
            == 1;
        if !only_child {
            break;
        }
        top = p;
    }
    Some(top)
}

fn with_siblings(dom: &Dom<'_>, top: usize, score: &[f64], removed: &[bool]) -> Vec<usize> {
    let Some(parent) = dom.parent(top) else {
        return vec![top];
    };
    let top_score = if score[top].is_nan() { 0.0 } else { score[top] };
    let threshold = (top_score * 0.2).max(10.0);
    let top_class = dom.attr(top, "class").unwrap_or("");
    let mut roots = Vec::new();
    for s in dom.children(parent) {
        if s == top {
            roots.push(s);
            continue;
        }
        if removed[s] || dom.element(s).is_none() {
            continue;
        }
        let bonus = if !top_class.is_empty() && dom.attr(s, "class") == Some(top_class) {
            top_score * 0.2
        } else {
            0.0
        };
        if !score[s].is_nan() && score[s] + bonus >= threshold {
            roots.push(s);
            continue;
        }
        let paragraph_like = dom.tag(s) == "p"
            || (matches!(dom.tag(s), "div" | "section") && !has_block_child(dom, s));
        if paragraph_like {
            let st = dom.stats(s);
            let density = st.link_density();
            if st.text > 80 && density < 0.25 {
                roots.push(s);
            } else if st.text > 0 && st.text <= 80 && density == 0.0 {
                let text = dom.inner_text(s, 200);
                if text.ends_with(['.', '!', '?', '。', '！', '？', '」'])
                    || text.contains(". ")
                    || text.contains('。')
                {
                    roots.push(s);
                }
            }
        }
    }
    roots
}

const IN_DATA_TABLE: u8 = 1;
const IN_CODE: u8 = 2;
const IN_FIGURE: u8 = 4;

fn context_bits(dom: &Dom<'_>, i: usize) -> u8 {
    match dom.tag(i) {
        "table" if is_data_table(dom, i) => IN_DATA_TABLE,
        "code" | "pre" => IN_CODE,
        "figure" => IN_FIGURE,
        _ => 0,
    }
}

/// Removes boilerplate inside a picked subtree (never the root itself).
fn clean(
    dom: &Dom<'_>,
    root: usize,
    pass: Pass,
    score: &[f64],
    title: Option<&str>,
    removed: &mut [bool],
) {
    // What encloses each node, filled top-down so no node looks up its
    // ancestors (a table's kind is worked out once).
    let end = dom.end(root);
    let mut ctx = vec![0u8; end - root];
    let mut anc = Some(root);
    while let Some(a) = anc {
        ctx[0] |= context_bits(dom, a);
        anc = dom.parent(a);
    }
    let mut root_text = RootText { root, text: None };
    let mut j = root + 1;
    while j < end {
        if removed[j] {
            j = dom.end(j);
            continue;
        }
        let parent = dom.parent(j).map_or(0, |p| ctx[p - root]);
        if dom.element(j).is_some()
            && (is_widget(dom, j, parent, &mut root_text)
                || should_clean(dom, j, pass, score, title, parent))
        {
            removed[j] = true;
            j = dom.end(j);
            continue;
        }
        ctx[j - root] = parent | context_bits(dom, j);
        j += 1;
    }
}

/// The text of the subtree being cleaned, read once and only when a quote
/// must be looked for in it.
struct RootText {
    root: usize,
    text: Option<String>,
}

impl RootText {
    fn get(&mut self, dom: &Dom<'_>) -> &str {
        let root = self.root;
        self.text
            .get_or_insert_with(|| dom.inner_text(root, usize::MAX))
    }
}

/// Headings of the blocks that interrupt an article with other articles,
/// sign-ups or sharing, lowercased, in the languages most often met; a block
/// is read as one when its text starts with one of them.
const WIDGET_HEADINGS: &[&str] = &[
    "related articles",
    "related stories",
    "related posts",
    "related news",
    "related content",
    "related links",
    "related reading",
    "related coverage",
    "related videos",
    "read more",
    "read next",
    "read also",
    "also read",
    "more from",
    "more stories",
    "more on this",
    "more in ",
    "you may also like",
    "you might also like",
    "recommended",
    "most popular",
    "most read",
    "trending",
    "popular posts",
    "share this",
    "sign up for",
    "subscribe to",
    "get our newsletter",
    "à lire aussi",
    "lire aussi",
    "sur le même sujet",
    "les plus lus",
    "mehr zum thema",
    "das könnte sie auch interessieren",
    "meistgelesen",
    "te puede interesar",
    "lo más visto",
    "más leídas",
    "noticias relacionadas",
    "leggi anche",
    "关联",
    "相关",
    "相關",
    "推荐阅读",
    "延伸阅读",
    "延伸閱讀",
    "热门",
    "熱門",
    "関連記事",
    "関連ニュース",
    "関連リンク",
    "おすすめ",
    "オススメ",
    "人気記事",
    "ランキング",
    "アクセスランキング",
    "あわせて読みたい",
    "この記事を読んだ人",
    "注目記事",
    "관련기사",
    "관련 기사",
    "많이 본",
    "เรื่องที่เกี่ยวข้อง",
];

/// Whether element `j` interrupts the article rather than belonging to it: a
/// pull quote (marked as one, or a blockquote repeating the article's own
/// words) or a block of links to other articles, sharing or a sign-up that
/// opens with such a heading. Unlike `should_clean` this holds in every pass:
/// these blocks are never the content, however little else there is.
fn is_widget(dom: &Dom<'_>, j: usize, enclosing: u8, root_text: &mut RootText) -> bool {
    if enclosing & (IN_CODE | IN_DATA_TABLE) != 0 {
        return false;
    }
    let tag = dom.tag(j);
    let hints = class_and_id(dom, j);
    if ["pullquote", "pull-quote", "pull_quote", "pullout"]
        .iter()
        .any(|h| hints.contains(h))
    {
        return true;
    }
    if tag == "blockquote" {
        let quote = dom.inner_text(j, 400);
        let quote = quote.trim_matches(|c: char| {
            c.is_whitespace()
                || matches!(
                    c,
                    '"' | '\'' | '“' | '”' | '‘' | '’' | '«' | '»' | '「' | '」'
                )
        });
        let len = folded_len(quote);
        // The article holds these words once besides this quote.
        return (20..=400).contains(&len) && root_text.get(dom).matches(quote).count() >= 2;
    }
    let heading = matches!(tag, "h2" | "h3" | "h4" | "h5" | "h6");
    if !heading && !matches!(tag, "div" | "section" | "ul" | "ol" | "p" | "dl" | "table") {
        return false;
    }
    let st = dom.stats(j);
    if heading {
        // A widget's heading standing apart from its list of links.
        return opens_widget(dom, j)
            && next_element(dom, j).is_some_and(|n| dom.stats(n).link_density() >= 0.5);
    }
    if st.text > 1500 {
        return false;
    }
    let density = st.link_density();
    if density >= 0.5
        && previous_element(dom, j).is_some_and(|p| {
            matches!(dom.tag(p), "h2" | "h3" | "h4" | "h5" | "h6") && opens_widget(dom, p)
        })
    {
        return true;
    }
    // Teasers of other articles carry descriptions beside their links: a
    // lower density suffices when the block opens with a heading element.
    let first = (j + 1..dom.end(j)).find(|&k| dom.element(k).is_some());
    let titled = first.is_some_and(|k| matches!(dom.tag(k), "h2" | "h3" | "h4" | "h5" | "h6"));
    density >= if titled { 0.1 } else { 0.3 } && opens_widget(dom, j)
}

/// Whether the text of `i` starts with a widget's heading.
fn opens_widget(dom: &Dom<'_>, i: usize) -> bool {
    let opening = dom.inner_text(i, 80).to_lowercase();
    WIDGET_HEADINGS.iter().any(|h| opening.starts_with(h))
}

fn next_element(dom: &Dom<'_>, i: usize) -> Option<usize> {
    let parent = dom.parent(i)?;
    dom.children(parent)
        .skip_while(|&c| c != i)
        .skip(1)
        .find(|&c| dom.element(c).is_some())
}

fn previous_element(dom: &Dom<'_>, i: usize) -> Option<usize> {
    let parent = dom.parent(i)?;
    dom.children(parent)
        .take_while(|&c| c != i)
        .filter(|&c| dom.element(c).is_some())
        .last()
}

fn should_clean(
    dom: &Dom<'_>,
    j: usize,
    pass: Pass,
    score: &[f64],
    title: Option<&str>,
    enclosing: u8,
) -> bool {
    let tag = dom.tag(j);
    if matches!(tag, "footer" | "aside" | "nav") {
        return true;
    }
    let hints = class_and_id(dom, j);
    let st = dom.stats(j);
    if (hints.contains("share") || hints.contains("sharing") || hints.contains("social"))
        && st.text < ENOUGH_TEXT
        && !matches!(tag, "html" | "body")
    {
        return true;
    }
    let weight = if pass.weight_classes {
        class_weight(dom, j)
    } else {
        0.0
    };
    let heading = matches!(tag, "h1" | "h2" | "h3" | "h4" | "h5" | "h6");
    if heading {
        if weight < 0.0 {
            return true;
        }
        if matches!(tag, "h1" | "h2")
            && let Some(title) = title
        {
            return similar(&dom.inner_text(j, 1000), title);
        }
        return false;
    }
    if !pass.clean
        || !matches!(
            tag,
            "form" | "fieldset" | "table" | "ul" | "ol" | "div" | "section" | "header"
        )
    {
        return false;
    }
    if tag == "table" && is_data_table(dom, j) {
        return false;
    }
    if enclosing & (IN_CODE | IN_DATA_TABLE) != 0 {
        return false;
    }
    let is_list = matches!(tag, "ul" | "ol");
    let own = if score[j].is_nan() { 0.0 } else { score[j] };
    if weight + own < 0.0 {
        return true;
    }
    if st.commas >= 10 {
        return false;
    }
    let p = st.p as f64;
    let img = st.img as f64;
    let li = st.li as f64 - 100.0;
    let input = st.input as f64;
    let heading_density = if st.text == 0 {
        0.0
    } else {
        st.heading as f64 / st.text as f64
    };
    let density = st.link_density();
    let in_figure = enclosing & IN_FIGURE != 0;
    (img > 1.0 && p / img < 0.5 && !in_figure)
        || (!is_list && li > p)
        || (input > (p / 3.0).floor())
        || (!is_list
            && heading_density < 0.9
            && st.text < MIN_PARAGRAPH
            && st.math == 0
            && (img == 0.0 || img > 2.0)
            && !in_figure)
        || (!is_list && weight < 25.0 && density > 0.2)
        || (weight >= 25.0 && density > 0.5)
        || (st.embed == 1 && st.text < 75)
        || st.embed > 1
}

/// Whether a table holds data (kept as a table) rather than layout.
pub(crate) fn is_data_table(dom: &Dom<'_>, t: usize) -> bool {
    if dom
        .attr(t, "role")
        .is_some_and(|r| r.eq_ignore_ascii_case("presentation"))
    {
        return false;
    }
    if dom.attr(t, "datatable") == Some("0") {
        return false;
    }
    if dom.attr(t, "summary").is_some_and(|s| !s.trim().is_empty()) {
        return true;
    }
    let end = dom.end(t);
    let (mut rows, mut cols, mut cells_in_row) = (0usize, 0usize, 0usize);
    let mut j = t + 1;
    while j < end {
        match dom.tag(j) {
            "table" => return false,
            "caption" if dom.stats(j).text > 0 => return true,
            "thead" | "tfoot" | "th" => return true,
            "tr" => {
                cols = cols.max(cells_in_row);
                cells_in_row = 0;
                rows += 1;
            }
            "td" => {
                let span = dom
                    .attr(j, "colspan")
                    .and_then(|s| s.trim().parse::<usize>().ok())
                    .unwrap_or(1)
                    .clamp(1, 50);
                cells_in_row += span;
            }
            _ => {}
        }
        j += 1;
    }
    cols = cols.max(cells_in_row);
    if rows >= 10 || cols > 4 {
        return true;
    }
    rows * cols > 10
}

/// Whether a heading repeats the title: nearly all its words are in the
/// title and they make up at least half of it.
fn similar(heading: &str, title: &str) -> bool {
    // Words of alphabetic text; each character of text written without spaces.
    let words = |s: &str| -> Vec<String> {
        let mut out = Vec::new();
        for run in s.split(|c: char| !c.is_alphanumeric()) {
            let mut word = String::new();
            for c in run.chars() {
                if is_cjk(c) {
                    if !word.is_empty() {
                        out.push(std::mem::take(&mut word).to_lowercase());
                    }
                    out.push(c.to_string());
                } else {
                    word.push(c);
                }
            }
            if !word.is_empty() {
                out.push(word.to_lowercase());
            }
        }
        out
    };
    let (h, t) = (words(heading), words(title));
    if h.is_empty() || t.is_empty() {
        return false;
    }
    let shared = h.iter().filter(|w| t.contains(w)).count();
    shared as f64 / h.len() as f64 >= 0.75 && shared as f64 / t.len() as f64 >= 0.5
}

/// Characters of readable text the content keeps.
pub(crate) fn kept_text_len(dom: &Dom<'_>, content: &Content) -> usize {
    let mut total = 0;
    for &root in &content.roots {
        let end = dom.end(root);
        let mut j = root;
        while j < end {
            if content.removed[j] || DEAD.contains(&dom.tag(j)) {
                j = dom.end(j);
                continue;
            }
            if let Some(t) = dom.text(j) {
                total += folded_len(t);
            }
            j += 1;
        }
    }
    total
}

/// The first paragraph of the content, for an excerpt.
pub(crate) fn first_paragraph(dom: &Dom<'_>, content: &Content) -> Option<String> {
    for &root in &content.roots {
        let end = dom.end(root);
        let mut j = root;
        while j < end {
            if content.removed[j] {
                j = dom.end(j);
                continue;
            }
            if dom.tag(j) == "p" {
                let text = dom.inner_text(j, 2000);
                if !text.is_empty() {
                    return Some(text);
                }
            }
            j += 1;
        }
    }
    None
}
