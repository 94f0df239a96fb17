//! Close-name suggestions for a tool name the registry does not know.

/// Names from `candidates` that look like `wanted`, best first.
pub fn close_names<'a>(wanted: &str, candidates: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let wanted = wanted.to_ascii_lowercase();
    let mut scored: Vec<(f64, &str)> = candidates
        .filter_map(|c| {
            let lower = c.to_ascii_lowercase();
            let mut score = strsim::jaro_winkler(&wanted, &lower);
            // "search" for search_documents, "folder" for folder_tree.
            if wanted.len() >= 4 && (lower.contains(&wanted) || wanted.contains(&lower)) {
                score = score.max(0.9);
            }
            (score >= 0.75).then_some((score, c))
        })
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(b.1)));
    let mut names: Vec<&str> = scored.into_iter().map(|(_, c)| c).collect();
    names.dedup();
    names.truncate(3);
    names
}

#[cfg(test)]
mod tests {
    use super::close_names;

    const NAMES: &[&str] = &[
        "document_info",
        "find_by_name",
        "folder_tree",
        "grep_documents",
        "list_folder_contents",
        "list_sources",
        "read_document",
        "search_documents",
    ];

    fn check(wanted: &str, expected_first: Option<&str>) {
        let got = close_names(wanted, NAMES.iter().copied());
        assert_eq!(got.first().copied(), expected_first, "{wanted}: {got:?}");
    }

    #[test]
    fn suggests_what_was_probably_meant() {
        check("search_document", Some("search_documents"));
        check("grep_document", Some("grep_documents"));
        check("Read_Document", Some("read_document"));
        check("list_source", Some("list_sources"));
        check("folder", Some("folder_tree"));
        check("xyzzy", None);
    }
}
