//! The Tantivy schema of the chunk index: one stemmed text, heading and title
//! field per supported language, an unstemmed fallback set, and the filter
//! fields.

use tantivy::schema::{
    FAST, Field, IndexRecordOption, STRING, Schema, TextFieldIndexing, TextOptions,
};
use tantivy::tokenizer::{
    AsciiFoldingFilter, Language, LowerCaser, RemoveLongFilter, SimpleTokenizer, Stemmer,
    TextAnalyzer, TokenizerManager,
};
use tantivy::{TantivyDocument, Term};
use uuid::Uuid;

use crate::ChunkDoc;

/// Bumped whenever analysis or storage changes in a way the schema cannot show
/// (a filter added to a tokenizer, say); an index written by another version is
/// rebuilt. Version 2: built without Tantivy's zstd, which version 1 could use
/// for the document-id dictionary and this build cannot read. Version 3: the
/// document's title field.
pub(crate) const FORMAT_VERSION: u32 = 3;

/// Tokens longer than this (in bytes) are dropped: they are hashes, base64 or
/// minified code, never words someone types, and they bloat the dictionary.
const MAX_TOKEN_BYTES: usize = 64;

pub(crate) const CHUNK_ID: &str = "chunk_id";
pub(crate) const DOCUMENT_ID: &str = "document_id";
const SPACE_ID: &str = "space_id";
const SOURCE_ID: &str = "source_id";
const FOLDER: &str = "folder";

/// The languages with a stemmed field: ISO 639-1 code, the ISO 639-3 / 639-2
/// codes that detectors also emit, and the Snowball stemmer.
const LANGUAGES: &[(&str, &[&str], Language)] = &[
    ("ar", &["ara"], Language::Arabic),
    ("da", &["dan"], Language::Danish),
    ("de", &["deu", "ger"], Language::German),
    ("el", &["ell", "gre"], Language::Greek),
    ("en", &["eng"], Language::English),
    ("es", &["spa"], Language::Spanish),
    ("fi", &["fin"], Language::Finnish),
    ("fr", &["fra", "fre"], Language::French),
    ("hu", &["hun"], Language::Hungarian),
    ("it", &["ita"], Language::Italian),
    ("nl", &["nld", "dut"], Language::Dutch),
    (
        "no",
        &["nor", "nob", "nno", "nb", "nn"],
        Language::Norwegian,
    ),
    ("pt", &["por"], Language::Portuguese),
    ("ro", &["ron", "rum"], Language::Romanian),
    ("ru", &["rus"], Language::Russian),
    ("sv", &["swe"], Language::Swedish),
    ("ta", &["tam"], Language::Tamil),
    ("tr", &["tur"], Language::Turkish),
];

/// Name of the fallback analysis, for documents in no stemmed language.
const PLAIN: &str = "plain";

/// The text, heading and title field of one analysis (a language, or the
/// fallback).
#[derive(Clone, Copy, Debug)]
pub(crate) struct LangFields {
    pub text: Field,
    pub heading: Field,
    pub title: Field,
}

/// Handles to every field, resolved once from the schema.
#[derive(Clone, Debug)]
pub(crate) struct Fields {
    pub chunk_id: Field,
    pub document_id: Field,
    pub space_id: Field,
    pub source_id: Field,
    pub folder: Field,
    /// Parallel to `LANGUAGES`.
    pub stemmed: Vec<LangFields>,
    pub plain: LangFields,
}

impl Fields {
    /// Every language's fields, the fallback last.
    pub fn analysed(&self) -> impl Iterator<Item = LangFields> + '_ {
        self.stemmed
            .iter()
            .copied()
            .chain(std::iter::once(self.plain))
    }

    /// The fields a chunk in `language` is written to; unknown or missing
    /// languages go to the unstemmed fallback.
    fn for_language(&self, language: Option<&str>) -> LangFields {
        language
            .and_then(language_slot)
            .and_then(|slot| self.stemmed.get(slot).copied())
            .unwrap_or(self.plain)
    }

    pub fn to_document(&self, chunk: &ChunkDoc) -> TantivyDocument {
        let mut doc = TantivyDocument::new();
        doc.add_i64(self.chunk_id, chunk.chunk_id);
        doc.add_text(self.document_id, uuid_text(chunk.document_id));
        doc.add_text(self.space_id, uuid_text(chunk.space_id));
        doc.add_text(self.source_id, uuid_text(chunk.source_id));
        for ancestor in folder_ancestors(&chunk.folder_path) {
            doc.add_text(self.folder, ancestor);
        }
        let target = self.for_language(chunk.language.as_deref());
        doc.add_text(target.text, &chunk.text);
        doc.add_text(target.heading, &chunk.heading);
        doc.add_text(target.title, &chunk.title);
        doc
    }

    pub fn document_term(&self, id: Uuid) -> Term {
        Term::from_field_text(self.document_id, &uuid_text(id))
    }

    pub fn space_term(&self, id: Uuid) -> Term {
        Term::from_field_text(self.space_id, &uuid_text(id))
    }

    pub fn source_term(&self, id: Uuid) -> Term {
        Term::from_field_text(self.source_id, &uuid_text(id))
    }

    /// The term matching a folder and everything below it.
    pub fn folder_term(&self, folder: &str) -> Term {
        Term::from_field_text(self.folder, &normalize_folder(folder))
    }

    /// Resolves the handles from a schema built by [`build_schema`].
    pub fn from_schema(schema: &Schema) -> tantivy::Result<Fields> {
        let stemmed = LANGUAGES
            .iter()
            .map(|(code, _, _)| lang_fields(schema, code))
            .collect::<tantivy::Result<Vec<_>>>()?;
        Ok(Fields {
            chunk_id: schema.get_field(CHUNK_ID)?,
            document_id: schema.get_field(DOCUMENT_ID)?,
            space_id: schema.get_field(SPACE_ID)?,
            source_id: schema.get_field(SOURCE_ID)?,
            folder: schema.get_field(FOLDER)?,
            stemmed,
            plain: lang_fields(schema, PLAIN)?,
        })
    }
}

fn lang_fields(schema: &Schema, code: &str) -> tantivy::Result<LangFields> {
    Ok(LangFields {
        text: schema.get_field(&format!("text_{code}"))?,
        heading: schema.get_field(&format!("heading_{code}"))?,
        title: schema.get_field(&format!("title_{code}"))?,
    })
}

/// Index position in `LANGUAGES` of a language tag such as `en`, `EN-us`,
/// `deu` or `pt_BR`.
fn language_slot(tag: &str) -> Option<usize> {
    let primary = tag.split(['-', '_']).next()?.trim().to_ascii_lowercase();
    LANGUAGES
        .iter()
        .position(|(code, aliases, _)| *code == primary || aliases.contains(&primary.as_str()))
}

/// True when chunks tagged `tag` are stemmed rather than indexed verbatim.
pub fn is_stemmed_language(tag: &str) -> bool {
    language_slot(tag).is_some()
}

fn tokenizer_name(code: &str) -> String {
    format!("dp_{code}")
}

pub(crate) fn build_schema() -> Schema {
    let mut builder = Schema::builder();
    // Read from the column for each hit, never searched, so not indexed.
    builder.add_i64_field(CHUNK_ID, FAST);
    builder.add_text_field(DOCUMENT_ID, STRING | FAST);
    builder.add_text_field(SPACE_ID, STRING);
    builder.add_text_field(SOURCE_ID, STRING);
    builder.add_text_field(FOLDER, STRING);
    let codes = LANGUAGES.iter().map(|(code, _, _)| *code).chain([PLAIN]);
    for code in codes {
        // Positions are kept so that quoted phrases can be matched.
        let options = TextOptions::default().set_indexing_options(
            TextFieldIndexing::default()
                .set_tokenizer(&tokenizer_name(code))
                .set_index_option(IndexRecordOption::WithFreqsAndPositions),
        );
        builder.add_text_field(&format!("text_{code}"), options.clone());
        builder.add_text_field(&format!("heading_{code}"), options.clone());
        builder.add_text_field(&format!("title_{code}"), options);
    }
    builder.build()
}

/// Registers the analysers the schema names; Tantivy does not persist them,
/// so this runs every time an index is opened.
pub(crate) fn register_tokenizers(manager: &TokenizerManager) {
    for (code, _, language) in LANGUAGES {
        // Folding after stemming lets a query typed without accents ("cafe")
        // meet the text that has them, without confusing the stemmer.
        let analyzer = TextAnalyzer::builder(SimpleTokenizer::default())
            .filter(RemoveLongFilter::limit(MAX_TOKEN_BYTES))
            .filter(LowerCaser)
            .filter(Stemmer::new(*language))
            .filter(AsciiFoldingFilter)
            .build();
        manager.register(&tokenizer_name(code), analyzer);
    }
    let plain = TextAnalyzer::builder(SimpleTokenizer::default())
        .filter(RemoveLongFilter::limit(MAX_TOKEN_BYTES))
        .filter(LowerCaser)
        .filter(AsciiFoldingFilter)
        .build();
    manager.register(&tokenizer_name(PLAIN), plain);
}

fn uuid_text(id: Uuid) -> String {
    id.hyphenated().to_string()
}

/// `/a//b/` and `a/b` both become `/a/b`; the root is `/`.
pub(crate) fn normalize_folder(path: &str) -> String {
    let mut out = String::with_capacity(path.len() + 1);
    for segment in path.split('/').filter(|s| !s.is_empty()) {
        out.push('/');
        out.push_str(segment);
    }
    if out.is_empty() {
        out.push('/');
    }
    out
}

/// `/a/b` is indexed as `/`, `/a` and `/a/b`, so that "this folder and all
/// below it" is a single exact term instead of a prefix scan that would also
/// catch `/ab`.
fn folder_ancestors(path: &str) -> Vec<String> {
    let full = normalize_folder(path);
    let mut out = vec!["/".to_owned()];
    for (i, ch) in full.char_indices().skip(1) {
        if ch == '/' {
            out.push(full[..i].to_owned());
        }
    }
    if full != "/" {
        out.push(full);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folders_normalize_and_expand_to_ancestors() {
        fn check(path: &str, expected: &[&str]) {
            assert_eq!(folder_ancestors(path), expected, "ancestors of {path:?}");
        }
        check("", &["/"]);
        check("/", &["/"]);
        check("/manual", &["/", "/manual"]);
        check(
            "/manual/sql-commands",
            &["/", "/manual", "/manual/sql-commands"],
        );
        check(
            "manual//sql-commands/",
            &["/", "/manual", "/manual/sql-commands"],
        );
    }

    #[test]
    fn language_tags_resolve_to_stemmers() {
        fn check(tag: &str, stemmed: bool) {
            assert_eq!(is_stemmed_language(tag), stemmed, "language tag {tag:?}");
        }
        check("en", true);
        check("EN-us", true);
        check("pt_BR", true);
        check("deu", true);
        check("nb", true);
        check("zh", false);
        check("", false);
        check("english", false);
    }
}
