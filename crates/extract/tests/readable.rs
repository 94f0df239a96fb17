//! Readable extraction on small inline pages: what is kept and dropped,
//! how each construct renders as Markdown, where metadata comes from, and
//! hostile input (deep nesting, garbage) that must neither panic nor hang.

#![allow(clippy::expect_used)] // a panic is how a test reports failure

use data_plane_extract::html::readable::{Link, Metadata, Page, extract_html};
use url::Url;

fn base() -> Url {
    Url::parse("https://example.com/blog/post.html").expect("static url")
}

fn page(body: &str) -> Page {
    extract_html(
        &format!("<html><head></head><body>{body}</body></html>"),
        Some(&base()),
    )
}

/// A paragraph long enough to count as content.
fn prose(topic: &str) -> String {
    format!(
        "<p>The {topic} report explains, in some detail, how the committee reached its decision, \
         which options it weighed, and why the final choice balances cost, safety and time.</p>"
    )
}

#[test]
fn markdown_constructs() {
    fn check(html: &str, expected: &str) {
        let got = page(html).markdown;
        assert_eq!(got, expected, "html: {html}");
    }
    let cases: &[(&str, &str)] = &[
        (
            "<h2>Section</h2><p>Text here.</p>",
            "## Section\n\nText here.",
        ),
        ("<h3>  A\n  heading </h3>", "### A heading"),
        (
            "<p>  one\n  two   three </p><p>four</p>",
            "one two three\n\nfour",
        ),
        (
            "<p>a <em>b</em> <strong>c</strong> <del>d</del> e</p>",
            "a *b* **c** ~~d~~ e",
        ),
        ("<p>x<b> bold </b>y</p>", "x **bold** y"),
        ("<p>use <code>a*b</code> here</p>", "use `a*b` here"),
        ("<p><code>has `tick`</code></p>", "`` has `tick` ``"),
        ("<p>line<br>next</p>", "line  \nnext"),
        ("<p>above</p><hr><p>below</p>", "above\n\n---\n\nbelow"),
        ("<ul><li>one</li><li>two</li></ul>", "- one\n- two"),
        ("<ol start=\"3\"><li>c</li><li>d</li></ol>", "3. c\n4. d"),
        (
            "<ul><li>one<ul><li>one.a</li><li>one.b<ol><li>deep</li></ol></li></ul></li><li>two</li></ul>",
            "- one\n  - one.a\n  - one.b\n    1. deep\n- two",
        ),
        (
            "<ol><li><p>para</p><p>more</p></li></ol>",
            "1. para\n\n   more",
        ),
        (
            "<blockquote><p>q1</p><p>q2</p></blockquote>",
            "> q1\n>\n> q2",
        ),
        (
            "<blockquote>outer<blockquote>inner</blockquote></blockquote>",
            "> outer\n>\n> > inner",
        ),
        (
            "<pre><code class=\"language-rust\">fn main() {\n    let x = 1;\n\n\n    x\n}</code></pre>",
            "```rust\nfn main() {\n    let x = 1;\n\n\n    x\n}\n```",
        ),
        ("<pre>a  b\n  c</pre>", "```\na  b\n  c\n```"),
        (
            "<table><tr><th>Name</th><th>Value</th></tr><tr><td>a</td><td>1|2</td></tr><tr><td colspan=\"2\">wide</td></tr></table>",
            "| Name | Value |\n| --- | --- |\n| a | 1\\|2 |\n| wide |  |",
        ),
        (
            "<table><caption>Sizes</caption><thead><tr><td>k</td><td>v</td></tr></thead><tbody><tr><td><b>x</b></td><td><a href=\"/y\">y</a></td></tr></tbody></table>",
            "Sizes\n\n| k | v |\n| --- | --- |\n| **x** | [y](https://example.com/y) |",
        ),
        (
            "<p><img src=\"cat.png\" alt=\"A cat\"></p>",
            "![A cat](https://example.com/blog/cat.png)",
        ),
        ("<p><img alt=\"Only alt\"></p>", "Only alt"),
        (
            "<p><img src=\"data:image/png;base64,AAAA\" alt=\"inline\"></p>",
            "inline",
        ),
        (
            "<p><a href=\"../about\">About us</a></p>",
            "[About us](https://example.com/about)",
        ),
        (
            "<p><a href=\"https://other.org/a(b)\">paren</a></p>",
            "[paren](https://other.org/a\\(b\\))",
        ),
        ("<p><a href=\"javascript:alert(1)\">click</a></p>", "click"),
        (
            "<h2>Usage <a href=\"#usage\">#</a></h2><p>Run it.</p>",
            "## Usage\n\nRun it.",
        ),
        (
            "<p>go<a href=\"/x\"> there </a>now</p>",
            "go [there](https://example.com/x) now",
        ),
        (
            "<p>*not emphasis* [x] snake_case _under_</p>",
            "\\*not emphasis\\* \\[x\\] snake_case \\_under\\_",
        ),
        ("<p># not a heading</p>", "\\# not a heading"),
        ("<p>1. not a list</p>", "1\\. not a list"),
        ("<p>a &lt;b&gt; c</p>", "a \\<b> c"),
        (
            "<div>loose <span>inline</span> text</div>",
            "loose inline text",
        ),
        ("<p>non&nbsp;breaking</p>", "non breaking"),
        ("<dl><dt>Term</dt><dd>Meaning</dd></dl>", "Term\n\nMeaning"),
        (
            "<p>a</p><script>var x = 1;</script><style>p{}</style><p>b</p>",
            "a\n\nb",
        ),
        (
            "<p>shown</p><p hidden>hidden attr</p><p style=\"display: none\">hidden style</p>",
            "shown",
        ),
    ];
    for (html, expected) in cases {
        check(html, expected);
    }
}

#[test]
fn links_are_listed_with_absolute_urls() {
    fn check(html: &str, base_url: Option<&Url>, expected: &[(&str, &str)]) {
        let got = extract_html(html, base_url).links;
        let want: Vec<Link> = expected
            .iter()
            .map(|(t, u)| Link {
                text: t.to_string(),
                url: u.to_string(),
            })
            .collect();
        assert_eq!(got, want, "html: {html}");
    }
    let b = base();
    type Case<'a> = (&'a str, Option<&'a Url>, &'a [(&'a str, &'a str)]);
    let cases: &[Case<'_>] = &[
        (
            "<p><a href=\"/a\">A</a> and <a href=\"b#frag\">B</a></p>",
            Some(&b),
            &[
                ("A", "https://example.com/a"),
                ("B", "https://example.com/blog/b#frag"),
            ],
        ),
        (
            "<html><head><base href=\"https://cdn.example.org/docs/\"></head><body><p><a href=\"page\">P</a></p></body></html>",
            Some(&b),
            &[("P", "https://cdn.example.org/docs/page")],
        ),
        (
            "<html><head><base href=\"/root/\"></head><body><p><a href=\"x\">X</a></p></body></html>",
            Some(&b),
            &[("X", "https://example.com/root/x")],
        ),
        (
            "<html><head><base href=\"https://cdn.example.org/\"></head><body><p><a href=\"y\">Y</a></p></body></html>",
            None,
            &[("Y", "https://cdn.example.org/y")],
        ),
        // Without any base a relative link cannot be made absolute: it stays
        // in the Markdown but is not listed.
        (
            "<p><a href=\"/rel\">R</a> <a href=\"https://abs.example/\">Abs</a></p>",
            None,
            &[("Abs", "https://abs.example/")],
        ),
        (
            "<p><a href=\"mailto:x@example.com\">mail</a> <a href=\"javascript:void(0)\">js</a> <a>none</a></p>",
            Some(&b),
            &[("mail", "mailto:x@example.com")],
        ),
        (
            "<p><a href=\"/a\">*star* text</a></p>",
            Some(&b),
            &[("*star* text", "https://example.com/a")],
        ),
    ];
    for (html, base_url, expected) in cases {
        check(html, *base_url, expected);
    }
}

/// A page with the boilerplate a reader never wants around one article.
fn cluttered_page() -> String {
    let article: String = ["budget", "transit", "housing", "schools", "parks"]
        .iter()
        .map(|t| prose(t))
        .collect();
    format!(
        r#"<html lang="en"><head><title>City Council Votes - Daily Bugle</title></head><body>
        <header class="site-header"><a href="/">Daily Bugle</a><nav><a href="/news">News</a> <a href="/sport">Sport</a></nav></header>
        <div id="cookie-banner">We use cookies to improve your experience. Accept all cookies.</div>
        <div class="layout">
          <div class="main-column">
            <article>
              <h1>City Council Votes</h1>
              <div class="share-tools"><a href="https://twitter.example/share">Share on Twitter</a> <a href="https://fb.example/share">Share on Facebook</a></div>
              {article}
              <div class="related-stories"><h3>Related stories</h3><ul>
                <li><a href="/r1">Mayor opens new bridge across the river today</a></li>
                <li><a href="/r2">Weather forecast promises sunny weekend for all</a></li>
                <li><a href="/r3">Local team wins the regional championship final</a></li>
              </ul></div>
            </article>
            <section id="comments"><h2>Comments</h2><p>First! This comment section is full of people, opinions, shouting, and noise.</p></section>
          </div>
          <aside class="sidebar"><h2>Most read</h2><p>Celebrity spotted buying groceries, fans are delighted, stores are crowded.</p></aside>
        </div>
        <div class="ad-slot advert">Buy the new phone now, with free shipping, discounts, and offers.</div>
        <footer><p>Copyright Daily Bugle, all rights reserved, terms, privacy, contact.</p></footer>
        </body></html>"#
    )
}

#[test]
fn boilerplate_is_left_out() {
    fn check(html: &str, kept: &[&str], dropped: &[&str]) {
        let md = extract_html(html, Some(&base())).markdown;
        for k in kept {
            assert!(md.contains(k), "expected {k:?} in:\n{md}");
        }
        for d in dropped {
            assert!(!md.contains(d), "expected no {d:?} in:\n{md}");
        }
    }
    let cluttered = cluttered_page();
    let split_article = format!(
        "<div id=\"page\"><div class=\"nav-links\"><a href=\"/1\">Home</a> | <a href=\"/2\">Archive</a> | <a href=\"/3\">About</a></div>\
         <div class=\"entry\">{}{}</div><div class=\"entry-more\">{}{}</div>\
         <div class=\"footer-links\"><a href=\"/t\">Terms of service and other legal documents</a></div></div>",
        prose("first"),
        prose("second"),
        prose("third"),
        prose("fourth")
    );
    let cases: Vec<(&str, Vec<&str>, Vec<&str>)> = vec![
        (
            cluttered.as_str(),
            vec!["The budget report", "The parks report", "weighed, and why"],
            vec![
                "Sport",
                "cookies",
                "Share on",
                "Related stories",
                "Mayor opens",
                "First!",
                "Most read",
                "Celebrity",
                "free shipping",
                "Copyright",
                "# City Council Votes",
            ],
        ),
        (
            split_article.as_str(),
            vec!["The first report", "The fourth report"],
            vec!["Archive", "Terms of service"],
        ),
    ];
    for (html, kept, dropped) in cases {
        check(html, &kept, &dropped);
    }
}

/// Navigation every synthetic layout below starts with.
const NAV: &str = r#"<div class="top"><ul><li><a href="/a">Home</a></li><li><a href="/b">World</a></li><li><a href="/c">Business</a></li></ul></div>"#;

#[test]
fn articles_split_by_widgets_keep_their_paragraphs_and_lose_the_widgets() {
    let p = |t: &str| prose(t);
    let layouts: Vec<(&str, String)> = vec![
        (
            "magazine segments between an ad, a pull quote, a sign-up and related links",
            format!(
                r#"{NAV}<article><h1>Big Story</h1><div class="article-body">
                <div class="body-segment">{}{}</div>
                <div class="ad-container"><div class="ad">Advertisement</div></div>
                <aside class="pullquote"><blockquote>“Widget words: a pull quote”</blockquote></aside>
                <div class="body-segment">{}</div>
                <div class="newsletter-signup"><h3>Sign up for our newsletter</h3><p>Widget words: the best stories every morning, in your inbox, for free.</p><form><input type="email"><button>Sign up</button></form></div>
                <div class="body-segment">{}{}</div>
                <div class="related-links"><h4>Read more</h4><ul><li><a href="/x">Widget words: the mayor and the bridge over the river</a></li><li><a href="/y">Widget words: weekend weather promises sun</a></li></ul></div>
                <div class="body-segment">{}</div></div></article>"#,
                p("one"),
                p("two"),
                p("three"),
                p("four"),
                p("five"),
                p("six")
            ),
        ),
        (
            "unclassed widgets and a pull quote repeating the text",
            format!(
                r#"{NAV}<div id="main"><div class="post"><h2>Post</h2><div>{}{}{}</div>
                <div><h3>You may also like</h3><ul><li><a href="/p1">Widget words: ten tips for a better garden</a></li><li><a href="/p2">Widget words: how we rebuilt the old barn</a></li></ul></div>
                <div>{}</div>
                <blockquote>which options it weighed, and why the final choice</blockquote>
                <div>{}</div><div>{}</div></div></div>"#,
                p("one"),
                p("two"),
                p("three"),
                p("four"),
                p("five"),
                p("six")
            ),
        ),
        (
            "paragraphs in one container around embeds, related posts and sharing",
            format!(
                r#"{NAV}<div class="entry-content">{}{}
                <div class="jp-relatedposts"><h3>Related</h3><div><a href="/r1">Widget words: an older post about the council</a></div><div><a href="/r2">Widget words: another older post on budgets</a></div></div>
                {}{}
                <div class="sharedaddy sd-sharing-enabled"><h3>Share this:</h3><ul><li><a href="/s1">Twitter</a></li><li><a href="/s2">Facebook</a></li></ul></div>
                {}{}</div>"#,
                p("one"),
                p("two"),
                p("three"),
                p("four"),
                p("five"),
                p("six")
            ),
        ),
        (
            "related teasers with descriptions under a plain heading",
            format!(
                r#"{NAV}<div class="content"><div>{}{}{}</div>
                <div><h3>Related articles</h3><div><a href="/t1">Widget words</a><p>Widget words: a short description of a related story, with commas and details.</p></div><div><a href="/t2">Widget words</a><p>Widget words: another description of a story, with commas, and words.</p></div></div>
                <div>{}{}{}</div></div>"#,
                p("one"),
                p("two"),
                p("three"),
                p("four"),
                p("five"),
                p("six")
            ),
        ),
    ];
    for (layout, body) in layouts {
        let md = page(&body).markdown;
        for t in ["one", "two", "three", "four", "five", "six"] {
            let kept = format!("The {t} report");
            assert!(md.contains(&kept), "{layout}: lost {kept:?} in:\n{md}");
        }
        assert!(
            !md.contains("Widget words"),
            "{layout}: kept a widget in:\n{md}"
        );
        assert!(
            !md.contains("which options it weighed, and why the final choice\n"),
            "{layout}: kept a pull quote in:\n{md}"
        );
        for chrome in ["Home", "Advertisement", "Sign up", "Share this", "Twitter"] {
            assert!(!md.contains(chrome), "{layout}: kept {chrome:?} in:\n{md}");
        }
    }
}

#[test]
fn japanese_pages_lose_readings_and_site_chrome() {
    let html = r#"<div id="header"><ul><li><a href="/">ホーム</a></li><li><a href="/n">ニュース</a></li><li><a href="/s">スポーツ</a></li></ul></div>
        <div id="main"><h1>東京で新しい図書館が開館</h1><div class="article">
        <p>東京都は十日、<ruby>中央<rp>（</rp><rt>ちゅうおう</rt><rp>）</rp></ruby>図書館を新たに開館したと発表した。館内には約五十万冊の本があり、子どもから大人まで利用できる。</p>
        <p>開館式には多くの市民が集まり、館長は「地域の知の拠点にしたい」と語った。利用は無料で、毎日午前九時から午後八時まで開いている。</p>
        <div><h3>関連記事</h3><ul><li><a href="/1">大阪で美術館が改装オープン、来場者が増加</a></li><li><a href="/2">京都の古書店街に若者が集まる理由とは</a></li></ul></div>
        <p>図書館では今後、<ruby>講演会<rt>こうえんかい</rt></ruby>や読書会などの催しも定期的に開く予定だという。担当者は「多くの人に足を運んでほしい」と話している。</p>
        </div><div class="box"><h3>アクセスランキング</h3><ol><li><a href="/r1">人気の記事その一について詳しく紹介します</a></li><li><a href="/r2">人気の記事その二について詳しく紹介します</a></li></ol></div></div>
        <div id="copyright">著作権は新聞社に帰属します</div>"#;
    let md = page(html).markdown;
    for kept in [
        "東京都は十日、中央図書館を新たに開館した",
        "館長は「地域の知の拠点にしたい」と語った。",
        "図書館では今後、講演会や読書会",
    ] {
        assert!(md.contains(kept), "expected {kept:?} in:\n{md}");
    }
    for dropped in [
        "ちゅうおう",
        "こうえんかい",
        "（",
        "ホーム",
        "関連記事",
        "美術館",
        "ランキング",
        "人気の記事",
        "著作権",
    ] {
        assert!(!md.contains(dropped), "expected no {dropped:?} in:\n{md}");
    }
}

#[test]
fn mathematics_is_kept_as_tex_or_text() {
    let tex = r#"<math><semantics><mrow><mi>E</mi><mo>=</mo><mi>m</mi><msup><mi>c</mi><mn>2</mn></msup></mrow><annotation encoding="application/x-tex">E = mc^2</annotation></semantics></math>"#;
    let display = r#"<math display="block"><mfrac><mrow><mi>a</mi><mo>+</mo><mi>b</mi></mrow><mn>2</mn></mfrac></math>"#;
    let katex = r#"<span class="katex"><span class="katex-mathml"><math><semantics><msqrt><mi>x</mi></msqrt><annotation encoding="application/x-tex">\sqrt{x}</annotation></semantics></math></span><span class="katex-html" aria-hidden="true"><span class="mord sqrt">√x glyphs</span></span></span>"#;
    let html = format!(
        "<article>{}<p>Einstein wrote {tex} for a body at rest, and the paper explains, in detail, what follows from it.</p>\
         <div class=\"equation\">{display}</div>\
         <p>The root {katex} grows slowly, as the second section shows, with examples.</p>{}</article>",
        prose("physics"),
        prose("maths"),
    );
    let md = page(&html).markdown;
    for kept in [
        "Einstein wrote $E = mc^2$ for a body",
        "\n\n(a + b)/2\n\n",
        "The root $\\sqrt{x}$ grows",
    ] {
        assert!(md.contains(kept), "expected {kept:?} in:\n{md}");
    }
    assert!(!md.contains("glyphs"), "{md}");
    // An uploaded document's text keeps them too.
    let doc = data_plane_extract::html::text::document(&html, &Default::default());
    assert!(
        doc.text.contains("Einstein wrote $E = mc^2$ for"),
        "{}",
        doc.text
    );
    assert!(doc.text.contains("\n\n(a + b)/2\n\n"), "{}", doc.text);
}

#[test]
fn metadata_comes_from_the_page() {
    fn check(head: &str, body: &str, expected: Metadata) {
        let html = format!(
            "<html{}<head>{head}</head><body>{body}</body></html>",
            if head.contains("LANG") {
                " lang=\"fr-CA\">"
            } else {
                ">"
            }
        );
        let got = extract_html(&html, None).metadata;
        assert_eq!(got, expected, "head: {head}");
    }
    let none = Metadata::default();
    let byline_body = format!(
        "<article><p class=\"byline\">By Jane Doe</p>{}</article>",
        prose("markup")
    );
    let cases: Vec<(&str, &str, Metadata)> = vec![
        ("<title>Plain title</title>", "", Metadata { title: Some("Plain title".into()), ..none.clone() }),
        (
            "<title>Story of the day - Example News</title><meta property=\"og:site_name\" content=\"Example News\">",
            "",
            Metadata { title: Some("Story of the day".into()), site_name: Some("Example News".into()), ..none.clone() },
        ),
        (
            "<title>Example News | Story of the day</title><meta property=\"og:site_name\" content=\"Example News\">",
            "",
            Metadata { title: Some("Story of the day".into()), site_name: Some("Example News".into()), ..none.clone() },
        ),
        (
            // The suffix is not the site name: kept.
            "<title>Story of the day | Archive</title><meta property=\"og:site_name\" content=\"Example News\">",
            "",
            Metadata { title: Some("Story of the day | Archive".into()), site_name: Some("Example News".into()), ..none.clone() },
        ),
        (
            "<title>Doc title</title><meta property=\"og:title\" content=\"OG title\"><meta name=\"twitter:title\" content=\"TW title\">",
            "",
            Metadata { title: Some("OG title".into()), ..none.clone() },
        ),
        (
            "<meta name=\"twitter:title\" content=\"TW title\"><meta name=\"author\" content=\"Ann Author\">\
             <meta name=\"description\" content=\"  A short   summary. \"><meta property=\"article:published_time\" content=\"2024-01-02T03:04:05Z\">\
             <meta http-equiv=\"Content-Language\" content=\"de\">",
            "",
            Metadata {
                title: Some("TW title".into()),
                byline: Some("Ann Author".into()),
                excerpt: Some("A short summary.".into()),
                language: Some("de".into()),
                published_time: Some("2024-01-02T03:04:05Z".into()),
                ..none.clone()
            },
        ),
        (
            "LANG<title>T</title><meta http-equiv=\"content-language\" content=\"de\">",
            "",
            Metadata { title: Some("T".into()), language: Some("fr-CA".into()), ..none.clone() },
        ),
        (
            r#"<title>Ignored | Paper</title><meta property="og:title" content="Also ignored">
            <script type="application/ld+json">{"@context":"https://schema.org","@type":"NewsArticle",
              "headline":"Headline from JSON-LD","datePublished":"2023-05-06",
              "author":[{"@type":"Person","name":"Ada"},{"@type":"Person","name":"Grace"}],
              "publisher":{"@type":"Organization","name":"The Paper"},"description":"LD summary"}</script>"#,
            "",
            Metadata {
                title: Some("Headline from JSON-LD".into()),
                byline: Some("Ada, Grace".into()),
                excerpt: Some("LD summary".into()),
                site_name: Some("The Paper".into()),
                published_time: Some("2023-05-06".into()),
                ..none.clone()
            },
        ),
        (
            r#"<script type="application/ld+json">{"@context":"https://schema.org","@graph":[
              {"@type":"WebSite","name":"Not an article"},
              {"@type":["BlogPosting"],"headline":"Graph post","author":"Solo Writer"}]}</script>"#,
            "",
            Metadata { title: Some("Graph post".into()), byline: Some("Solo Writer".into()), ..none.clone() },
        ),
        (
            "<title>Broken LD</title><script type=\"application/ld+json\">{\"@type\": \"Article\", headline: oops</script>",
            "",
            Metadata { title: Some("Broken LD".into()), ..none.clone() },
        ),
        (
            "<title>Byline markup</title>",
            &byline_body,
            Metadata {
                title: Some("Byline markup".into()),
                byline: Some("By Jane Doe".into()),
                excerpt: Some(
                    "The markup report explains, in some detail, how the committee reached its decision, which options it weighed, and why the final choice balances cost, safety and time."
                        .into(),
                ),
                ..none.clone()
            },
        ),
        (
            "<meta name=\"description\" content=\"Tom &amp;amp; Jerry&amp;#39;s &amp;#x1F600;\">",
            "",
            Metadata { excerpt: Some("Tom & Jerry's \u{1F600}".into()), ..none.clone() },
        ),
    ];
    for (head, body, expected) in cases {
        check(head, body, expected);
    }
}

#[test]
fn byline_markup_is_not_repeated_in_the_content() {
    let html = format!(
        "<html><body><article><a rel=\"author\" href=\"/u/jd\">Jane Doe</a>{}{}</article></body></html>",
        prose("first"),
        prose("second")
    );
    let page = extract_html(&html, None);
    assert_eq!(page.metadata.byline.as_deref(), Some("Jane Doe"));
    assert!(!page.markdown.contains("Jane Doe"), "{}", page.markdown);
}

#[test]
fn deep_nesting_neither_overflows_nor_loses_text() {
    fn check(open: &str, close: &str) {
        let depth = 100_000;
        let html = format!(
            "<html><body>{}<p>deep text at the bottom</p>{}</body></html>",
            open.repeat(depth),
            close.repeat(depth)
        );
        let page = extract_html(&html, None);
        assert!(
            page.markdown.contains("deep text at the bottom"),
            "{open}: {:.200}",
            page.markdown
        );
    }
    let cases: &[(&str, &str)] = &[
        ("<div>", "</div>"),
        ("<span>", "</span>"),
        ("<b><i>", "</i></b>"),
        ("<blockquote>", "</blockquote>"),
        ("<ul><li>", "</li></ul>"),
        ("<table><tr><td>", "</td></tr></table>"),
        ("<a href=\"/x\">", "</a>"),
        ("<section><article>", "</article></section>"),
        // Never closed at all.
        ("<div class=\"x\">", ""),
    ];
    for (open, close) in cases {
        check(open, close);
    }
}

#[test]
fn garbage_never_panics() {
    let fixed: &[&str] = &[
        "",
        " ",
        "plain text, no tags at all",
        "<",
        "<<<>>>",
        "</p></div></body></html>",
        "<html><body></body></html>",
        "<!-- unterminated comment",
        "<script>never closed",
        "<a href=\"",
        "<img src=x onerror=alert(1)>",
        "<table><td>cell without row<th>head</table>",
        "<ol start=\"-5\"><li>x</li></ol><ol start=\"99999999999999999999\"><li>y</li></ol>",
        "<td colspan=\"1000000000\">wide</td>",
        "<pre>```fence inside```</pre>",
        "\u{0}\u{1}\u{feff}<p>\u{202e}mixed</p>",
        "<base href=\"::::\"><a href=\"%%%\">bad</a>",
        "<script type=\"application/ld+json\">[[[[[[[[[[[[[[[[[[[[</script>",
    ];
    for html in fixed {
        let _ = extract_html(html, Some(&base()));
        let _ = extract_html(html, None);
    }
    // Random soup of tags, attributes, entities and text from a fixed seed.
    let pieces = [
        "<div>",
        "</div>",
        "<p>",
        "</p>",
        "<ul>",
        "<li>",
        "</ul>",
        "<table>",
        "<tr>",
        "<td>",
        "</table>",
        "<pre>",
        "</pre>",
        "<a href=\"/x\">",
        "</a>",
        "<blockquote>",
        "<b>",
        "</i>",
        "<h2>",
        "</h2>",
        "text, words",
        " ",
        "\n",
        "&amp;",
        "&#0;",
        "&#x110000;",
        "<img alt=\"a\">",
        "<br>",
        "`",
        "*",
        "|",
        "<code>",
        "</code>",
        "<script>",
        "</script>",
        "<!--",
        "-->",
        "<",
        ">",
        "\"",
        "é漢",
        "<ol start=\"7\">",
        "<th colspan=9>",
        "<meta name=author content=x>",
        "<title>",
        "</title>",
    ];
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..300 {
        let mut html = String::new();
        for _ in 0..200 {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            html.push_str(pieces[(state >> 33) as usize % pieces.len()]);
        }
        let _ = extract_html(&html, Some(&base()));
    }
}

#[test]
fn empty_page_gives_empty_result() {
    for html in [
        "",
        "<html></html>",
        "<html><head><title></title></head><body>   </body></html>",
    ] {
        let page = extract_html(html, None);
        assert_eq!(page.markdown, "", "html: {html:?}");
        assert!(page.links.is_empty());
        assert_eq!(page.metadata.title, None);
    }
}
