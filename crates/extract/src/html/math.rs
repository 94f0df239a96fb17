//! Mathematics as text, for both readers: a MathML `<math>` element (or a
//! MathJax `<script type="math/tex">`) becomes its TeX source where the page
//! carries one, else a linear reading of its presentation markup
//! (`x^2`, `a/b`, `√(x)`), so formulas survive extraction instead of
//! vanishing or collapsing into a run of glyphs.

use super::dom::Dom;

/// TeX nested deeper than this is read as flat text: real formulas nest a
/// few levels, and the reading recurses on the formula's depth only to here.
const MAX_DEPTH: usize = 32;

/// Annotation encodings that hold TeX.
const TEX_ENCODINGS: &[&str] = &[
    "application/x-tex",
    "text/x-tex",
    "application/x-latex",
    "text/x-latex",
    "tex",
    "latex",
];

/// A formula's text and whether it stands as a block of its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Formula {
    /// TeX wrapped in `$…$` (`$$…$$` for display), or the linear reading.
    pub text: String,
    pub display: bool,
}

/// Whether element `i` is a formula `formula` reads.
pub(crate) fn is_formula(dom: &Dom<'_>, i: usize) -> bool {
    match dom.tag(i) {
        "math" => true,
        "script" => tex_script(dom, i).is_some(),
        _ => false,
    }
}

/// The `type` of a MathJax TeX script, lowercased, when `i` is one.
fn tex_script(dom: &Dom<'_>, i: usize) -> Option<String> {
    let kind = dom.attr(i, "type")?.trim().to_ascii_lowercase();
    (kind.starts_with("math/tex") || kind.starts_with("math/latex")).then_some(kind)
}

/// Reads formula `i` (`is_formula`); None when it holds nothing to read.
pub(crate) fn formula(dom: &Dom<'_>, i: usize) -> Option<Formula> {
    if dom.tag(i) == "script" {
        let display = tex_script(dom, i)?.contains("mode=display");
        let tex = fold(&subtree_text(dom, i));
        return (!tex.is_empty()).then(|| wrap(&tex, display));
    }
    let display = dom
        .attr(i, "display")
        .or_else(|| dom.attr(i, "mode"))
        .is_some_and(|d| d.trim().eq_ignore_ascii_case("block") || d.trim() == "display");
    if let Some(tex) = tex_annotation(dom, i) {
        return Some(wrap(&tex, display));
    }
    let mut text = fold(&linear(dom, i, 0));
    if text.is_empty() {
        text = dom.attr(i, "alttext").map(fold).unwrap_or_default();
    }
    (!text.is_empty()).then_some(Formula { text, display })
}

fn wrap(tex: &str, display: bool) -> Formula {
    let text = if display {
        format!("$${tex}$$")
    } else {
        format!("${tex}$")
    };
    Formula { text, display }
}

/// The folded text of the first TeX annotation inside `i`.
fn tex_annotation(dom: &Dom<'_>, i: usize) -> Option<String> {
    (i + 1..dom.end(i))
        .filter(|&j| dom.tag(j) == "annotation")
        .find(|&j| {
            dom.attr(j, "encoding").is_some_and(|e| {
                let e = e.trim().to_ascii_lowercase();
                TEX_ENCODINGS.contains(&e.as_str())
            })
        })
        .map(|j| fold(&subtree_text(dom, j)))
        .filter(|t| !t.is_empty())
}

fn subtree_text(dom: &Dom<'_>, i: usize) -> String {
    (i..dom.end(i)).filter_map(|j| dom.text(j)).collect()
}

fn fold(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn element_children(dom: &Dom<'_>, i: usize) -> Vec<usize> {
    dom.children(i)
        .filter(|&c| dom.element(c).is_some())
        .collect()
}

/// Operators read with a space either side.
fn spaced(op: &str) -> bool {
    matches!(
        op,
        "=" | "+"
            | "-"
            | "−"
            | "±"
            | "∓"
            | "×"
            | "÷"
            | "·"
            | "⋅"
            | "<"
            | ">"
            | "≤"
            | "≥"
            | "≠"
            | "≈"
            | "≡"
            | "∼"
            | "≃"
            | "≅"
            | "∝"
            | "→"
            | "←"
            | "↔"
            | "⇒"
            | "⇐"
            | "⇔"
            | "↦"
            | "∈"
            | "∉"
            | "⊂"
            | "⊆"
            | "⊃"
            | "⊇"
            | "∪"
            | "∩"
            | "∧"
            | "∨"
            | ":="
    )
}

/// A script or operand: bare when it is one token, else in parentheses.
fn group(s: &str) -> String {
    let t = s.trim();
    let simple = t.chars().count() <= 1
        || t.chars().all(char::is_alphanumeric)
        || (t.starts_with('(') && t.ends_with(')') && t.matches('(').count() == 1)
        || (t.starts_with('{') && t.ends_with('}'));
    if simple {
        t.to_string()
    } else {
        format!("({t})")
    }
}

/// The linear reading of presentation MathML element `i`.
fn linear(dom: &Dom<'_>, i: usize, depth: usize) -> String {
    if depth > MAX_DEPTH {
        return fold(&subtree_text(dom, i));
    }
    let kids = element_children(dom, i);
    let part = |k: usize| {
        kids.get(k)
            .map_or(String::new(), |&c| linear(dom, c, depth + 1))
    };
    let row = |from: usize| -> String {
        kids.iter()
            .skip(from)
            .map(|&c| linear(dom, c, depth + 1))
            .collect()
    };
    // A large operator with limits (a sum, an integral) is followed by its operand.
    let after_operator = |k: usize| {
        if kids.get(k).is_some_and(|&c| dom.tag(c) == "mo") {
            " "
        } else {
            ""
        }
    };
    match dom.tag(i) {
        "mi" | "mn" | "mtext" | "ms" => fold(&subtree_text(dom, i)),
        "mo" => {
            // Invisible times, function application and separator say nothing aloud.
            let op: String = fold(&subtree_text(dom, i))
                .chars()
                .filter(|c| !matches!(c, '\u{2061}'..='\u{2064}'))
                .collect();
            if spaced(&op) {
                format!(" {op} ")
            } else if op == "," || op == ";" {
                format!("{op} ")
            } else {
                op
            }
        }
        "mspace" => " ".to_string(),
        "annotation" | "annotation-xml" | "mphantom" | "none" | "mprescripts" => String::new(),
        "semantics" | "maction" => part(0),
        "msup" | "mover" => format!("{}^{}", part(0), group(&part(1))) + after_operator(0),
        "msub" | "munder" => format!("{}_{}", part(0), group(&part(1))) + after_operator(0),
        "msubsup" | "munderover" => {
            format!("{}_{}^{}", part(0), group(&part(1)), group(&part(2))) + after_operator(0)
        }
        "mfrac" => format!("{}/{}", group(&part(0)), group(&part(1))),
        "msqrt" => format!("√({})", row(0).trim()),
        "mroot" => format!("√[{}]({})", part(1).trim(), part(0).trim()),
        "mfenced" => {
            let open = dom.attr(i, "open").unwrap_or("(");
            let close = dom.attr(i, "close").unwrap_or(")");
            let sep = dom
                .attr(i, "separators")
                .and_then(|s| s.trim().chars().next())
                .unwrap_or(',');
            let inner: Vec<String> = kids
                .iter()
                .map(|&c| linear(dom, c, depth + 1).trim().to_string())
                .collect();
            format!("{open}{}{close}", inner.join(&format!("{sep} ")))
        }
        "mtable" => {
            let rows: Vec<String> = kids
                .iter()
                .map(|&r| linear(dom, r, depth + 1).trim().to_string())
                .collect();
            format!("[{}]", rows.join("; "))
        }
        "mtr" | "mlabeledtr" => {
            let cells: Vec<String> = kids
                .iter()
                .map(|&c| linear(dom, c, depth + 1).trim().to_string())
                .collect();
            cells.join(", ")
        }
        _ => row(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(html: &str, expected: Option<(&str, bool)>) {
        let doc = scraper::Html::parse_document(html);
        let dom = Dom::build(&doc);
        let i = (0..dom.len())
            .find(|&i| is_formula(&dom, i))
            .expect("a formula");
        let got = formula(&dom, i);
        let got = got.as_ref().map(|f| (f.text.as_str(), f.display));
        assert_eq!(got, expected, "{html}");
    }

    #[test]
    fn formulas_read_as_tex_or_linear_text() {
        let cases: &[(&str, Option<(&str, bool)>)] = &[
            // TeX annotation wins, inline and display.
            (
                r#"<math><semantics><mrow><msup><mi>x</mi><mn>2</mn></msup></mrow>
                   <annotation encoding="application/x-tex">x^{2}</annotation></semantics></math>"#,
                Some(("$x^{2}$", false)),
            ),
            (
                r#"<math display="block"><semantics><mfrac><mi>a</mi><mi>b</mi></mfrac>
                   <annotation encoding="application/x-tex">\frac{a}{b}
                   </annotation></semantics></math>"#,
                Some(("$$\\frac{a}{b}$$", true)),
            ),
            // Only a non-TeX annotation: the presentation is read.
            (
                r#"<math><semantics><mi>y</mi><annotation encoding="StarMath 5.0">y</annotation></semantics></math>"#,
                Some(("y", false)),
            ),
            // Presentation markup alone.
            (
                "<math><mi>E</mi><mo>=</mo><mi>m</mi><msup><mi>c</mi><mn>2</mn></msup></math>",
                Some(("E = mc^2", false)),
            ),
            (
                "<math><msub><mi>x</mi><mrow><mi>i</mi><mo>+</mo><mn>1</mn></mrow></msub></math>",
                Some(("x_(i + 1)", false)),
            ),
            (
                "<math><mfrac><mrow><mi>a</mi><mo>+</mo><mi>b</mi></mrow><mn>2</mn></mfrac></math>",
                Some(("(a + b)/2", false)),
            ),
            (
                "<math><msqrt><mi>x</mi><mo>+</mo><mn>1</mn></msqrt><mo>≤</mo><mroot><mi>y</mi><mn>3</mn></mroot></math>",
                Some(("√(x + 1) ≤ √[3](y)", false)),
            ),
            (
                "<math><mi>f</mi><mo>\u{2061}</mo><mfenced><mi>x</mi><mi>y</mi></mfenced></math>",
                Some(("f(x, y)", false)),
            ),
            (
                "<math><munderover><mo>∑</mo><mrow><mi>i</mi><mo>=</mo><mn>1</mn></mrow><mi>n</mi></munderover><msub><mi>a</mi><mi>i</mi></msub></math>",
                Some(("∑_(i = 1)^n a_i", false)),
            ),
            (
                "<math><mtable><mtr><mtd><mn>1</mn></mtd><mtd><mn>0</mn></mtd></mtr><mtr><mtd><mn>0</mn></mtd><mtd><mn>1</mn></mtd></mtr></mtable></math>",
                Some(("[1, 0; 0, 1]", false)),
            ),
            // No tokens: the alternative text, else nothing.
            (
                r#"<math alttext="x squared"></math>"#,
                Some(("x squared", false)),
            ),
            ("<math></math>", None),
            // MathJax's TeX scripts.
            (
                r#"<script type="math/tex">a^2+b^2</script>"#,
                Some(("$a^2+b^2$", false)),
            ),
            (
                r#"<script type="math/tex; mode=display">\int_0^1 x\,dx</script>"#,
                Some(("$$\\int_0^1 x\\,dx$$", true)),
            ),
        ];
        for (html, expected) in cases {
            check(html, *expected);
        }
    }
}
