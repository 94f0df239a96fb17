//! A flat, pre-order copy of scraper's tree with subtree sums, so every
//! later pass is a loop over indices instead of a recursion over depth.
//!
//! Node `i`'s descendants are exactly the indices `i + 1 .. end(i)`; a
//! subtree's text length, link text, commas and tag counts are differences
//! of prefix sums.

use ego_tree::iter::Edge;
use scraper::node::Element;
use scraper::{Html, Node as SNode};

pub(crate) const NONE: usize = usize::MAX;

#[derive(Clone, Copy)]
pub(crate) enum Data<'a> {
    Element(&'a Element),
    Text(&'a str),
    Other,
}

#[derive(Clone, Copy)]
pub(crate) struct Node<'a> {
    pub data: Data<'a>,
    pub parent: usize,
    /// One past the last descendant.
    pub end: usize,
}

/// Tags whose contents are never readable text, for both readers (the
/// readable extraction of web pages and the whole-document text of uploads,
/// which also drops page chrome: `text::CHROME`).
///
/// Ruby's `rt` and `rp` are: a reading printed over the text would
/// otherwise be run into it ("漢字かんじ").
/// MathML is not here: its token elements are counted as text, and both
/// readers render a formula whole through `math` (a TeX annotation inside it,
/// never shown as text, is here).
pub(crate) const DEAD: &[&str] = &[
    "script",
    "style",
    "noscript",
    "template",
    "iframe",
    "object",
    "embed",
    "svg",
    "annotation",
    "annotation-xml",
    // Ruby annotations (readings over Japanese or Chinese text): the base text alone is read.
    "rt",
    "rp",
    "canvas",
    "button",
    "input",
    "select",
    "textarea",
    "option",
    "link",
    "meta",
    "head",
    "title",
    "frameset",
    "frame",
    "audio",
    "video",
    "source",
    "track",
    "map",
    "dialog",
];

/// Elements that start a block of their own: the one list of both readers
/// (the whole-document text joins table cells on their row's line, so it
/// takes every block here but `td` and `th`).
pub(crate) const BLOCK: &[&str] = &[
    "address",
    "article",
    "aside",
    "blockquote",
    "body",
    "center",
    "dd",
    "details",
    "dialog",
    "dir",
    "div",
    "dl",
    "dt",
    "fieldset",
    "figcaption",
    "figure",
    "footer",
    "form",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "header",
    "hgroup",
    "hr",
    "li",
    "main",
    "menu",
    "nav",
    "ol",
    "p",
    "pre",
    "section",
    "summary",
    "table",
    "tbody",
    "td",
    "tfoot",
    "th",
    "thead",
    "tr",
    "ul",
    "caption",
    "html",
];

pub(crate) fn is_block(tag: &str) -> bool {
    BLOCK.contains(&tag)
}

/// Prefix sums over the pre-order (`sum[i]` covers nodes `0 .. i`).
#[derive(Default)]
pub(crate) struct Sums {
    pub text: Vec<u32>,
    pub link: Vec<u32>,
    pub hash_link: Vec<u32>,
    pub commas: Vec<u32>,
    pub p: Vec<u32>,
    pub img: Vec<u32>,
    pub li: Vec<u32>,
    pub input: Vec<u32>,
    pub embed: Vec<u32>,
    pub heading: Vec<u32>,
    pub math: Vec<u32>,
}

/// What a subtree holds.
#[derive(Clone, Copy, Default, Debug)]
pub(crate) struct Stats {
    pub text: usize,
    pub link: f64,
    pub commas: usize,
    pub p: usize,
    pub img: usize,
    pub li: usize,
    pub input: usize,
    pub embed: usize,
    pub heading: usize,
    /// Formulas (`math::is_formula`).
    pub math: usize,
}

impl Stats {
    pub fn link_density(&self) -> f64 {
        if self.text == 0 {
            0.0
        } else {
            (self.link / self.text as f64).min(1.0)
        }
    }
}

pub(crate) struct Dom<'a> {
    pub nodes: Vec<Node<'a>>,
    sums: Sums,
}

impl<'a> Dom<'a> {
    pub fn build(html: &'a Html) -> Self {
        let mut nodes: Vec<Node<'a>> = Vec::with_capacity(html.tree.values().len());
        let mut stack: Vec<usize> = Vec::new();
        for edge in html.tree.root().traverse() {
            match edge {
                Edge::Open(node) => {
                    let data = match node.value() {
                        SNode::Element(e) => Data::Element(e),
                        SNode::Text(t) => Data::Text(t),
                        _ => Data::Other,
                    };
                    let idx = nodes.len();
                    nodes.push(Node {
                        data,
                        parent: stack.last().copied().unwrap_or(NONE),
                        end: idx + 1,
                    });
                    stack.push(idx);
                }
                Edge::Close(_) => {
                    if let Some(idx) = stack.pop() {
                        nodes[idx].end = nodes.len();
                    }
                }
            }
        }
        let sums = compute_sums(&nodes);
        Dom { nodes, sums }
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn end(&self, i: usize) -> usize {
        self.nodes[i].end
    }

    pub fn parent(&self, i: usize) -> Option<usize> {
        let p = self.nodes[i].parent;
        (p != NONE).then_some(p)
    }

    pub fn element(&self, i: usize) -> Option<&'a Element> {
        match self.nodes[i].data {
            Data::Element(e) => Some(e),
            _ => None,
        }
    }

    /// Lowercase local name, or "" for a non-element.
    pub fn tag(&self, i: usize) -> &'a str {
        self.element(i).map_or("", |e| e.name())
    }

    pub fn attr(&self, i: usize, name: &str) -> Option<&'a str> {
        self.element(i).and_then(|e| e.attr(name))
    }

    pub fn text(&self, i: usize) -> Option<&'a str> {
        match self.nodes[i].data {
            Data::Text(t) => Some(t),
            _ => None,
        }
    }

    /// Child indices of `i`, in order.
    pub fn children(&self, i: usize) -> Children<'_, 'a> {
        Children {
            dom: self,
            next: i + 1,
            end: self.nodes[i].end,
        }
    }

    pub fn stats(&self, i: usize) -> Stats {
        let e = self.nodes[i].end;
        let s = &self.sums;
        let d = |v: &Vec<u32>| (v[e] - v[i]) as usize;
        let hash = d(&s.hash_link) as f64;
        Stats {
            text: d(&s.text),
            link: d(&s.link) as f64 + hash * 0.3,
            commas: d(&s.commas),
            p: d(&s.p),
            img: d(&s.img),
            li: d(&s.li),
            input: d(&s.input),
            embed: d(&s.embed),
            heading: d(&s.heading),
            math: d(&s.math),
        }
    }

    /// The subtree's text with whitespace folded, cut after about `limit` bytes.
    pub fn inner_text(&self, i: usize, limit: usize) -> String {
        let mut out = String::new();
        let mut space = false;
        let end = self.nodes[i].end;
        let mut j = i;
        while j < end && out.len() <= limit {
            if super::math::is_formula(self, j) {
                if let Some(f) = super::math::formula(self, j) {
                    if space && !out.is_empty() {
                        out.push(' ');
                    }
                    space = false;
                    out.push_str(&f.text);
                }
                j = self.nodes[j].end;
                continue;
            }
            if DEAD.contains(&self.tag(j)) && j != i {
                j = self.nodes[j].end;
                continue;
            }
            if let Some(t) = self.text(j) {
                for c in t.chars() {
                    if c.is_ascii_whitespace() {
                        space = true;
                    } else {
                        if space && !out.is_empty() {
                            out.push(' ');
                        }
                        space = false;
                        out.push(if c == '\u{a0}' { ' ' } else { c });
                    }
                }
            } else if is_block(self.tag(j)) || self.tag(j) == "br" {
                space = true;
            }
            j += 1;
        }
        out
    }

    /// First element named `tag` inside `i`'s subtree.
    pub fn find(&self, i: usize, tag: &str) -> Option<usize> {
        (i..self.nodes[i].end).find(|&j| self.tag(j) == tag)
    }
}

pub(crate) struct Children<'d, 'a> {
    dom: &'d Dom<'a>,
    next: usize,
    end: usize,
}

impl Iterator for Children<'_, '_> {
    type Item = usize;
    fn next(&mut self) -> Option<usize> {
        if self.next >= self.end {
            return None;
        }
        let i = self.next;
        self.next = self.dom.nodes[i].end;
        Some(i)
    }
}

/// Length of `t` with runs of ASCII whitespace counted once, in characters
/// of alphabetic text: a Chinese, Japanese or Korean character counts as
/// `CJK_WEIGHT`, because such text carries as much in one character as
/// alphabetic text does in a word, without spaces. Every measure of how much
/// text a block holds (paragraph points, "enough text", link density) then
/// means the same for both kinds of script.
pub(crate) fn folded_len(t: &str) -> usize {
    let mut n = 0;
    let mut in_space = true;
    for c in t.chars() {
        if c.is_ascii_whitespace() {
            if !in_space {
                n += 1;
            }
            in_space = true;
        } else {
            n += if is_cjk(c) { CJK_WEIGHT } else { 1 };
            in_space = false;
        }
    }
    n
}

/// What one CJK character counts for in `folded_len`.
const CJK_WEIGHT: usize = 3;

/// Han ideographs, kana and Hangul syllables: scripts written without spaces
/// between words.
pub(crate) fn is_cjk(c: char) -> bool {
    matches!(c,
        '\u{3040}'..='\u{30FF}'   // hiragana, katakana
        | '\u{3400}'..='\u{4DBF}' // CJK extension A
        | '\u{4E00}'..='\u{9FFF}' // CJK unified ideographs
        | '\u{AC00}'..='\u{D7AF}' // Hangul syllables
        | '\u{F900}'..='\u{FAFF}' // CJK compatibility ideographs
        | '\u{FF66}'..='\u{FF9F}' // half-width katakana
        | '\u{20000}'..='\u{2FA1F}')
}

fn compute_sums(nodes: &[Node<'_>]) -> Sums {
    const IN_LINK: u8 = 1;
    const IN_HASH_LINK: u8 = 2;
    const IN_DEAD: u8 = 4;
    const IN_HEADING: u8 = 8;
    let n = nodes.len();
    let mut flags = vec![0u8; n];
    let mut s = Sums::default();
    for v in [
        &mut s.text,
        &mut s.link,
        &mut s.hash_link,
        &mut s.commas,
        &mut s.p,
        &mut s.img,
        &mut s.li,
        &mut s.input,
        &mut s.embed,
        &mut s.heading,
        &mut s.math,
    ] {
        v.reserve(n + 1);
        v.push(0);
    }
    for (i, node) in nodes.iter().enumerate() {
        let mut f = if node.parent == NONE {
            0
        } else {
            flags[node.parent]
        };
        let (mut text, mut commas, mut p, mut img, mut li, mut input, mut embed, mut math) =
            (0u32, 0u32, 0u32, 0u32, 0u32, 0u32, 0u32, 0u32);
        match node.data {
            Data::Element(e) => {
                let tag = e.name();
                if DEAD.contains(&tag) {
                    f |= IN_DEAD;
                }
                match tag {
                    "a" => {
                        if let Some(href) = e.attr("href") {
                            f |= if href.trim_start().starts_with('#') {
                                IN_HASH_LINK
                            } else {
                                IN_LINK
                            };
                        }
                    }
                    "p" => p = 1,
                    "img" => img = 1,
                    "li" => li = 1,
                    "input" | "select" | "textarea" | "button" => input = 1,
                    "embed" | "object" | "iframe" | "video" | "audio" => embed = 1,
                    "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => f |= IN_HEADING,
                    "math" => math = 1,
                    "script"
                        if e.attr("type").is_some_and(|t| {
                            t.trim().to_ascii_lowercase().starts_with("math/")
                        }) =>
                    {
                        math = 1
                    }
                    _ => {}
                }
            }
            Data::Text(t) if f & IN_DEAD == 0 => {
                text = u32::try_from(folded_len(t)).unwrap_or(u32::MAX);
                commas = u32::try_from(
                    t.chars()
                        .filter(|c| matches!(c, ',' | '，' | '、' | '،'))
                        .count(),
                )
                .unwrap_or(u32::MAX);
            }
            _ => {}
        }
        flags[i] = f;
        let push = |v: &mut Vec<u32>, x: u32| {
            let last = v.last().copied().unwrap_or(0);
            v.push(last.saturating_add(x));
        };
        push(&mut s.text, text);
        push(&mut s.link, if f & IN_LINK != 0 { text } else { 0 });
        push(
            &mut s.hash_link,
            if f & IN_HASH_LINK != 0 && f & IN_LINK == 0 {
                text
            } else {
                0
            },
        );
        push(&mut s.commas, commas);
        push(&mut s.p, p);
        push(&mut s.img, img);
        push(&mut s.li, li);
        push(&mut s.input, input);
        push(&mut s.embed, embed);
        push(&mut s.heading, if f & IN_HEADING != 0 { text } else { 0 });
        push(&mut s.math, math);
    }
    s
}
