//! Close-name suggestions: what a caller probably meant by a name that does
//! not exist, for tool names here and folder names in list_folder_contents.

/// How close a candidate must be to be suggested.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Closeness {
    /// Least Jaro-Winkler similarity of the lowercased names.
    pub min_score: f64,
    /// A wanted name at least this long that contains a candidate, or is
    /// contained in one, counts as close whatever its score ("search" for
    /// search_documents, "guide" for guides).
    pub min_contained_len: usize,
}

impl Closeness {
    /// Tool names: few, short and alike (`list_sources`, `list_folder_contents`).
    pub const TOOL_NAMES: Closeness = Closeness {
        min_score: 0.75,
        min_contained_len: 4,
    };
    /// Folder names: many, and a wrong suggestion sends the model astray.
    pub const FOLDER_NAMES: Closeness = Closeness {
        min_score: 0.8,
        min_contained_len: 3,
    };
}

/// Tool names from `candidates` that look like `wanted`, best first, at most three.
pub fn close_names<'a>(wanted: &str, candidates: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    close_names_by(wanted, candidates, Closeness::TOOL_NAMES)
}

/// Names from `candidates` at least `closeness` close to `wanted`, best
/// first (ties by name), without repeats, at most three.
pub fn close_names_by<'a>(
    wanted: &str,
    candidates: impl Iterator<Item = &'a str>,
    closeness: Closeness,
) -> Vec<&'a str> {
    let wanted = wanted.to_lowercase();
    let mut scored: Vec<(f64, &str)> = candidates
        .filter_map(|c| {
            let lower = c.to_lowercase();
            let mut score = strsim::jaro_winkler(&wanted, &lower);
            if wanted.chars().count() >= closeness.min_contained_len
                && (lower.contains(&wanted) || wanted.contains(&lower))
            {
                score = score.max(0.9);
            }
            (score >= closeness.min_score).then_some((score, c))
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

    #[test]
    fn folder_names_need_to_be_closer() {
        let folders = ["guides", "reference", "release-notes", "Tutorials"];
        let got = |wanted| {
            super::close_names_by(
                wanted,
                folders.iter().copied(),
                super::Closeness::FOLDER_NAMES,
            )
        };
        assert_eq!(got("guide"), ["guides"]);
        assert_eq!(got("tutorial"), ["Tutorials"]);
        assert_eq!(got("refrence"), ["reference"]);
        assert!(got("xyz").is_empty());
    }
}
