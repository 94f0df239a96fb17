//! Keyword queries: turning what a user typed into a BM25 query over every
//! language field, restricted by the caller's filters inside Tantivy.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};
use tantivy::collector::TopDocs;
use tantivy::columnar::{Column, StrColumn};
use tantivy::query::{
    Bm25StatisticsProvider, BooleanQuery, BoostQuery, ConstScoreQuery, Occur, PhraseQuery, Query,
    TermQuery, TermSetQuery,
};
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::{DocAddress, Searcher, Term};
use uuid::Uuid;

use crate::schema::{CHUNK_ID, DOCUMENT_ID, Fields};
use crate::{KeywordIndex, SearchError};

/// The most hits one query may ask for, `limit + offset` together; the
/// collector keeps that many candidates in memory.
pub const MAX_WINDOW: usize = 10_000;
/// A pasted page of text would otherwise become thousands of term lookups in
/// every language field; words beyond this many are ignored.
const MAX_QUERY_TOKENS: usize = 64;
/// What a word weighs in a chunk's section heading, and in its document's
/// title, against the same word in the chunk's own text (1): an admin
/// setting (`search_field_weights`), `{"heading": 2, "title": 0.2}` unless
/// changed. 0 leaves the field out. The title's default was chosen on
/// SciFact's training claims (docs/search.md): a title repeated on every
/// passage of its document quickly outweighs what the passage itself says.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "WeightsSpec", into = "WeightsSpec")]
pub struct FieldWeights {
    pub heading: f64,
    pub title: f64,
}

impl Default for FieldWeights {
    fn default() -> Self {
        FieldWeights {
            heading: DEFAULT_HEADING_WEIGHT,
            title: DEFAULT_TITLE_WEIGHT,
        }
    }
}

const DEFAULT_HEADING_WEIGHT: f64 = 2.0;
const DEFAULT_TITLE_WEIGHT: f64 = 0.2;
/// A larger weight would let one field decide every ranking.
const MAX_FIELD_WEIGHT: f64 = 10.0;

/// [`FieldWeights`] as settings write it; a field left out keeps its default.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WeightsSpec {
    #[serde(default = "default_heading")]
    heading: f64,
    #[serde(default = "default_title")]
    title: f64,
}

fn default_heading() -> f64 {
    DEFAULT_HEADING_WEIGHT
}

fn default_title() -> f64 {
    DEFAULT_TITLE_WEIGHT
}

impl TryFrom<WeightsSpec> for FieldWeights {
    type Error = String;

    fn try_from(spec: WeightsSpec) -> Result<Self, String> {
        for (name, w) in [("heading", spec.heading), ("title", spec.title)] {
            if !(0.0..=MAX_FIELD_WEIGHT).contains(&w) {
                return Err(format!(
                    "{name} must lie between 0 and {MAX_FIELD_WEIGHT}, not {w}"
                ));
            }
        }
        Ok(FieldWeights {
            heading: spec.heading,
            title: spec.title,
        })
    }
}

impl From<FieldWeights> for WeightsSpec {
    fn from(w: FieldWeights) -> Self {
        WeightsSpec {
            heading: w.heading,
            title: w.title,
        }
    }
}

/// BM25's term-frequency saturation `k1`, an admin setting (`search_bm25`,
/// `{"k1": 0.5}` unless changed; docs/search.md has the measurements).
///
/// Tantivy's scorer fixes k1 = 1.2 and b = 0.75 but takes its corpus
/// statistics from the caller. Reporting the average passage length `f`
/// times its true value gives, for ranking, BM25 with `k1' = 0.3 + 0.9 / f`
/// and `b' = 1 − 0.3 / k1'`: the product `k1 · (1 − b)` stays at Tantivy's
/// 0.3, so length normalisation `b` follows from `k1` (k1 0.5 → b 0.4; k1
/// 1.2 → b 0.75, Tantivy's own). A lower k1 lets a word's first
/// occurrences count for most of its weight and lets a long passage keep
/// more of its score.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "Bm25Spec", into = "Bm25Spec")]
pub struct Bm25 {
    k1: f64,
}

const TANTIVY_K1: f64 = 1.2;
/// Tantivy's `k1 · (1 − b)`, which no statistic changes.
const TANTIVY_K1_FLOOR: f64 = 0.3;
const DEFAULT_K1: f64 = 0.5;
const MAX_K1: f64 = 3.0;

impl Bm25 {
    /// `k1` within (0.3, 3]; b follows as `1 − 0.3 / k1`.
    pub fn with_k1(k1: f64) -> Result<Bm25, String> {
        if k1.is_finite() && k1 > TANTIVY_K1_FLOOR && k1 <= MAX_K1 {
            Ok(Bm25 { k1 })
        } else {
            Err(format!(
                "k1 must be above {TANTIVY_K1_FLOOR} and at most {MAX_K1}, not {k1}"
            ))
        }
    }

    pub fn k1(self) -> f64 {
        self.k1
    }

    /// The length normalisation that goes with this `k1`.
    pub fn b(self) -> f64 {
        1.0 - TANTIVY_K1_FLOOR / self.k1
    }

    /// Whether this is the pair Tantivy's index was written for, so that
    /// its block-max pruning is exact.
    fn is_tantivys(self) -> bool {
        self.k1 == TANTIVY_K1
    }

    /// What the average passage length is multiplied by for Tantivy.
    fn length_scale(self) -> f64 {
        (TANTIVY_K1 - TANTIVY_K1_FLOOR) / (self.k1 - TANTIVY_K1_FLOOR)
    }
}

impl Default for Bm25 {
    fn default() -> Self {
        Bm25 { k1: DEFAULT_K1 }
    }
}

/// [`Bm25`] as settings write it.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Bm25Spec {
    #[serde(default = "default_k1")]
    k1: f64,
}

fn default_k1() -> f64 {
    DEFAULT_K1
}

impl TryFrom<Bm25Spec> for Bm25 {
    type Error = String;

    fn try_from(spec: Bm25Spec) -> Result<Self, String> {
        Bm25::with_k1(spec.k1)
    }
}

impl From<Bm25> for Bm25Spec {
    fn from(bm25: Bm25) -> Self {
        Bm25Spec { k1: bm25.k1 }
    }
}

/// The searcher's statistics with every field's token count scaled, which
/// is how [`Bm25`] reaches Tantivy's scorer.
struct ScaledLengths<'a> {
    searcher: &'a Searcher,
    scale: f64,
}

impl Bm25StatisticsProvider for ScaledLengths<'_> {
    fn total_num_tokens(&self, field: Field) -> tantivy::Result<u64> {
        let tokens = Bm25StatisticsProvider::total_num_tokens(self.searcher, field)?;
        // Rounded up, so a field with any token never averages zero.
        Ok((tokens as f64 * self.scale).ceil() as u64)
    }

    fn total_num_docs(&self) -> tantivy::Result<u64> {
        Bm25StatisticsProvider::total_num_docs(self.searcher)
    }

    fn doc_freq(&self, term: &Term) -> tantivy::Result<u64> {
        self.searcher.doc_freq(term)
    }
}

/// A keyword search. Text is plain words; `"quoted phrases"` must appear as
/// such. Nothing a user types makes the query fail.
#[derive(Clone, Debug, PartialEq)]
pub struct KeywordQuery {
    pub text: String,
    /// The spaces the caller may read: only their chunks are returned, and
    /// none at all when the list is empty.
    pub space_ids: Vec<Uuid>,
    /// Restrict to these documents; `Some(empty)` matches nothing.
    pub document_ids: Option<Vec<Uuid>>,
    /// Restrict to these sources; `Some(empty)` matches nothing.
    pub source_ids: Option<Vec<Uuid>>,
    /// Restrict to a folder and everything below it, e.g. `/manual`.
    pub folder_prefix: Option<String>,
    pub limit: usize,
    pub offset: usize,
    /// What headings and titles weigh against the text.
    pub weights: FieldWeights,
    pub bm25: Bm25,
}

impl Default for KeywordQuery {
    fn default() -> Self {
        KeywordQuery {
            text: String::new(),
            space_ids: Vec::new(),
            document_ids: None,
            source_ids: None,
            folder_prefix: None,
            limit: 10,
            offset: 0,
            weights: FieldWeights::default(),
            bm25: Bm25::default(),
        }
    }
}

/// One matching chunk, best first; `score` is BM25 and comparable only
/// within one result list.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KeywordHit {
    pub chunk_id: i64,
    pub document_id: Uuid,
    pub score: f32,
}

impl KeywordIndex {
    /// The best `limit` chunks after skipping `offset`, among the chunks that
    /// pass every filter.
    pub fn search(&self, q: &KeywordQuery) -> Result<Vec<KeywordHit>, SearchError> {
        let window = q.limit.saturating_add(q.offset);
        if window > MAX_WINDOW {
            return Err(SearchError::WindowTooLarge(window));
        }
        let excluded_by_filter = q.space_ids.is_empty()
            || q.document_ids.as_ref().is_some_and(Vec::is_empty)
            || q.source_ids.as_ref().is_some_and(Vec::is_empty);
        if q.limit == 0 || excluded_by_filter {
            return Ok(Vec::new());
        }
        let inner = self.inner();
        let searcher = inner.reader.searcher();
        let Some(text) = self.text_query(&searcher, &q.text, &q.weights)? else {
            return Ok(Vec::new());
        };
        let fields = &inner.fields;
        let mut clauses: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        let spaces: HashSet<Term> = q
            .space_ids
            .iter()
            .map(|id| fields.space_term(*id))
            .collect();
        // Tantivy's block-max pruning bounds each block of a word's postings
        // by one entry chosen when the block was written, under its own k1
        // and b; with other statistics that entry may no longer be the
        // block's best, and pruning could skip a passage that belongs on
        // the page. So the bare words (pruned) go alone only under Tantivy's
        // own pair; otherwise the filter stays and every match is scored.
        if !(q.bm25.is_tantivys() && holds_only(&searcher, fields.space_id, &spaces)?) {
            clauses.push(filter(spaces));
        }
        if let Some(ids) = &q.document_ids {
            clauses.push(filter(ids.iter().map(|id| fields.document_term(*id))));
        }
        if let Some(ids) = &q.source_ids {
            clauses.push(filter(ids.iter().map(|id| fields.source_term(*id))));
        }
        if let Some(folder) = &q.folder_prefix {
            clauses.push(filter([fields.folder_term(folder)]));
        }
        let collector = TopDocs::with_limit(q.limit)
            .and_offset(q.offset)
            .order_by_score();
        let statistics = ScaledLengths {
            searcher: &searcher,
            scale: q.bm25.length_scale(),
        };
        let top = if clauses.is_empty() {
            // Nothing to filter out (and Tantivy's own k1): the words alone,
            // whose disjunction Tantivy prunes with block-max WAND (blocks
            // of a common word that cannot lift a chunk into the page are
            // skipped), where a filter clause would make it score every
            // matching chunk.
            searcher.search_with_statistics_provider(&*text, &collector, &statistics)?
        } else {
            clauses.insert(0, (Occur::Must, text));
            let query = BooleanQuery::new(clauses);
            searcher.search_with_statistics_provider(&query, &collector, &statistics)?
        };
        resolve_hits(&searcher, top)
    }

    /// Every field's reading of the user's text, or `None` when it holds no
    /// searchable word at all.
    fn text_query(
        &self,
        searcher: &Searcher,
        text: &str,
        weights: &FieldWeights,
    ) -> Result<Option<Box<dyn Query>>, SearchError> {
        let inner = self.inner();
        let parts = split_phrases(text);
        let mut words: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        let mut phrases: Vec<Vec<(Occur, Box<dyn Query>)>> =
            parts.phrases.iter().map(|_| Vec::new()).collect();
        let mut seen: HashSet<Term> = HashSet::new();
        for field in searchable_fields(searcher, &inner.fields, weights)? {
            let mut analyzer = inner.index.tokenizer_for_field(field.field)?;
            let mut tokens = Vec::new();
            for chunk in &parts.words {
                analyzer
                    .token_stream(chunk)
                    .process(&mut |t| tokens.push(t.text.clone()));
            }
            for token in tokens.into_iter().take(MAX_QUERY_TOKENS) {
                let term = Term::from_field_text(field.field, &token);
                if seen.insert(term.clone()) {
                    words.push((Occur::Should, field.boost(term_query(term))));
                }
            }
            for (phrase, alternatives) in parts.phrases.iter().zip(phrases.iter_mut()) {
                let mut terms = Vec::new();
                analyzer
                    .token_stream(phrase)
                    .process(&mut |t| terms.push(Term::from_field_text(field.field, &t.text)));
                terms.truncate(MAX_QUERY_TOKENS);
                let query: Box<dyn Query> = match terms.len() {
                    0 => continue,
                    1 => term_query(terms.remove(0)),
                    _ => Box::new(PhraseQuery::new(terms)),
                };
                alternatives.push((Occur::Should, field.boost(query)));
            }
        }
        // A phrase whose words reach no field means the phrase cannot match.
        let phrase_count = parts.phrases.iter().filter(|p| has_word(p)).count();
        let mut clauses: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        for alternatives in phrases.into_iter().filter(|a| !a.is_empty()) {
            clauses.push((Occur::Must, Box::new(BooleanQuery::new(alternatives))));
        }
        if clauses.len() < phrase_count {
            return Ok(Some(Box::new(tantivy::query::EmptyQuery)));
        }
        if clauses.is_empty() {
            if words.is_empty() {
                return Ok(None);
            }
            return Ok(Some(Box::new(BooleanQuery::new(words))));
        }
        // Words next to a phrase only rank the phrase matches, they are not required.
        clauses.extend(words);
        Ok(Some(Box::new(BooleanQuery::new(clauses))))
    }
}

/// A field to search and how much its matches weigh.
struct SearchField {
    field: Field,
    boost: Option<f32>,
}

impl SearchField {
    fn boost(&self, query: Box<dyn Query>) -> Box<dyn Query> {
        match self.boost {
            Some(boost) => Box::new(BoostQuery::new(query, boost)),
            None => query,
        }
    }
}

/// The text, heading and title fields (those of weight above 0) that hold
/// any term in this searcher: most indexes use a few languages, and looking
/// query terms up in the empty fields of the others is wasted work.
fn searchable_fields(
    searcher: &Searcher,
    fields: &Fields,
    weights: &FieldWeights,
) -> Result<Vec<SearchField>, SearchError> {
    let mut out = Vec::new();
    for lang in fields.analysed() {
        for (field, boost) in [
            (lang.text, None),
            (lang.heading, Some(weights.heading as f32)),
            (lang.title, Some(weights.title as f32)),
        ] {
            if boost == Some(0.0) {
                continue;
            }
            let mut used = false;
            for segment in searcher.segment_readers() {
                if segment.inverted_index(field)?.terms().num_terms() > 0 {
                    used = true;
                    break;
                }
            }
            if used {
                out.push(SearchField { field, boost });
            }
        }
    }
    Ok(out)
}

fn term_query(term: Term) -> Box<dyn Query> {
    Box::new(TermQuery::new(term, IndexRecordOption::WithFreqs))
}

/// A clause that admits only chunks carrying one of `terms` and adds nothing
/// to their score, so filters never change the ranking.
fn filter(terms: impl IntoIterator<Item = Term>) -> (Occur, Box<dyn Query>) {
    let set = TermSetQuery::new(terms);
    (
        Occur::Must,
        Box::new(ConstScoreQuery::new(Box::new(set), 0.0)),
    )
}

/// True when every entry of the index, deleted ones included, carries one of
/// `terms` in `field` (a field with one value per entry, like the space): a
/// filter on them would then admit everything.
fn holds_only(
    searcher: &Searcher,
    field: Field,
    terms: &HashSet<Term>,
) -> Result<bool, SearchError> {
    for segment in searcher.segment_readers() {
        let postings = segment.inverted_index(field)?;
        let entries = u64::from(segment.max_doc());
        let mut covered = 0u64;
        for term in terms {
            if covered >= entries {
                break;
            }
            covered += u64::from(
                postings
                    .doc_freq(term)
                    .map_err(tantivy::TantivyError::from)?,
            );
        }
        if covered < entries {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The user's text split into loose words and `"quoted phrases"`; an
/// unbalanced quote counts as plain text.
#[derive(Debug, Default, PartialEq)]
struct Parts<'a> {
    words: Vec<&'a str>,
    phrases: Vec<&'a str>,
}

fn split_phrases(text: &str) -> Parts<'_> {
    let pieces: Vec<&str> = text.split('"').collect();
    let last = pieces.len() - 1;
    let mut parts = Parts::default();
    for (i, piece) in pieces.into_iter().enumerate() {
        // Odd pieces sit between two quotes, except a trailing unclosed one.
        if i % 2 == 1 && i < last {
            parts.phrases.push(piece);
        } else {
            parts.words.push(piece);
        }
    }
    parts
}

fn has_word(text: &str) -> bool {
    text.chars().any(char::is_alphanumeric)
}

/// Reads chunk and document ids from the columns of each hit's segment.
fn resolve_hits(
    searcher: &Searcher,
    top: Vec<(f32, DocAddress)>,
) -> Result<Vec<KeywordHit>, SearchError> {
    let mut columns: HashMap<u32, (Column<i64>, StrColumn)> = HashMap::new();
    let mut hits = Vec::with_capacity(top.len());
    let mut buf = String::new();
    for (score, address) in top {
        let (chunk_ids, document_ids) = match columns.entry(address.segment_ord) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => {
                let fast = searcher.segment_reader(address.segment_ord).fast_fields();
                let chunk_ids = fast.i64(CHUNK_ID)?;
                let document_ids = fast.str(DOCUMENT_ID)?.ok_or_else(|| {
                    SearchError::Internal(format!(
                        "keyword index segment lacks the {DOCUMENT_ID} column"
                    ))
                })?;
                e.insert((chunk_ids, document_ids))
            }
        };
        let missing = || {
            SearchError::Internal(format!(
                "keyword index document {address:?} has no chunk or document id"
            ))
        };
        let chunk_id = chunk_ids.first(address.doc_id).ok_or_else(missing)?;
        let ord = document_ids
            .ords()
            .first(address.doc_id)
            .ok_or_else(missing)?;
        buf.clear();
        document_ids.ord_to_str(ord, &mut buf).map_err(|e| {
            SearchError::Internal(format!("cannot read document id of chunk {chunk_id}: {e}"))
        })?;
        let document_id = Uuid::parse_str(&buf).map_err(|_| {
            SearchError::Internal(format!(
                "chunk {chunk_id} has document id {buf:?}, not a uuid"
            ))
        })?;
        hits.push(KeywordHit {
            chunk_id,
            document_id,
            score,
        });
    }
    Ok(hits)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ChunkDoc, IndexOp};

    fn chunk_in(space: u128, id: i64) -> IndexOp {
        IndexOp::ReplaceDocument {
            document_id: Uuid::from_u128(1000 + id as u128),
            chunks: vec![ChunkDoc {
                chunk_id: id,
                document_id: Uuid::from_u128(1000 + id as u128),
                space_id: Uuid::from_u128(space),
                source_id: Uuid::from_u128(7),
                folder_path: "/".into(),
                document_path: format!("/doc-{id}.txt"),
                language: Some("en".into()),
                heading: String::new(),
                title: String::new(),
                text: "vacuum".into(),
            }],
        }
    }

    /// Whether the search may leave the space filter out: only when every
    /// entry belongs to one of the caller's spaces. (Deleted entries count
    /// until Tantivy drops them, which at worst keeps a useless filter.)
    #[test]
    fn the_space_filter_is_dropped_only_when_it_admits_everything() {
        let index = KeywordIndex::in_memory().unwrap();
        let fields = index.inner().fields.clone();
        let covers = |spaces: &[u128]| {
            let terms: HashSet<Term> = spaces
                .iter()
                .map(|s| fields.space_term(Uuid::from_u128(*s)))
                .collect();
            holds_only(&index.inner().reader.searcher(), fields.space_id, &terms).unwrap()
        };
        index
            .apply(vec![chunk_in(1, 1), chunk_in(1, 2)], 1)
            .unwrap();
        assert!(covers(&[1]));
        assert!(covers(&[1, 2]));
        assert!(!covers(&[2]));
        assert!(!covers(&[]));
        index
            .apply(vec![chunk_in(1, 4), chunk_in(2, 3)], 2)
            .unwrap();
        assert!(!covers(&[1]));
        assert!(covers(&[2, 1]));
    }

    #[test]
    fn field_weights_read_with_defaults_and_bounds() {
        let read = |v: serde_json::Value| serde_json::from_value::<FieldWeights>(v);
        assert_eq!(
            read(serde_json::json!({})).unwrap(),
            FieldWeights::default()
        );
        assert_eq!(
            read(serde_json::json!({"title": 0})).unwrap(),
            FieldWeights {
                heading: 2.0,
                title: 0.0
            }
        );
        for bad in [
            serde_json::json!({"heading": -0.5}),
            serde_json::json!({"title": 11}),
            serde_json::json!({"titel": 1}),
            serde_json::json!({"title": "high"}),
        ] {
            assert!(read(bad.clone()).is_err(), "{bad}");
        }
        assert_eq!(
            serde_json::to_value(FieldWeights::default()).unwrap(),
            serde_json::json!({"heading": 2.0, "title": 0.2})
        );
    }

    #[test]
    fn bm25_reads_k1_with_its_bounds_and_derives_b() {
        let read = |v: serde_json::Value| serde_json::from_value::<Bm25>(v);
        assert_eq!(read(serde_json::json!({})).unwrap(), Bm25::default());
        assert_eq!(Bm25::default().k1(), 0.5);
        assert!((Bm25::default().b() - 0.4).abs() < 1e-12);
        // Tantivy's own pair needs no scaling at all.
        let tantivy = read(serde_json::json!({"k1": 1.2})).unwrap();
        assert!((tantivy.b() - 0.75).abs() < 1e-12);
        assert!((tantivy.length_scale() - 1.0).abs() < 1e-12);
        // A lower k1 reports longer passages, a higher one shorter.
        assert!(Bm25::default().length_scale() > 1.0);
        assert!(Bm25::with_k1(2.0).unwrap().length_scale() < 1.0);
        for bad in [
            serde_json::json!({"k1": 0.3}),
            serde_json::json!({"k1": 0}),
            serde_json::json!({"k1": 3.5}),
            serde_json::json!({"k1": "low"}),
            serde_json::json!({"k1": 0.9, "b": 0.4}),
        ] {
            assert!(read(bad.clone()).is_err(), "{bad}");
        }
        assert_eq!(
            serde_json::to_value(Bm25::default()).unwrap(),
            serde_json::json!({"k1": 0.5})
        );
    }

    #[test]
    fn quotes_split_into_phrases() {
        fn check(text: &str, words: &[&str], phrases: &[&str]) {
            let parts = split_phrases(text);
            assert_eq!(parts.words, words, "words of {text:?}");
            assert_eq!(parts.phrases, phrases, "phrases of {text:?}");
        }
        check("plain words", &["plain words"], &[]);
        check(r#"a "b c" d"#, &["a ", " d"], &["b c"]);
        check(r#""only phrase""#, &["", ""], &["only phrase"]);
        check(r#"open "quote"#, &["open ", "quote"], &[]);
        check(r#"x "p1" y "p2" "#, &["x ", " y ", " "], &["p1", "p2"]);
        check(r#"""#, &["", ""], &[]);
    }
}
