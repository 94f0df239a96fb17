//! The space's documents as MCP resources: listed a page at a time, read
//! through read_document (its profile, settings, gate, limits and audit),
//! under the caller's row-level security (docs/mcp.md, "Documents as
//! resources").

use data_plane_registry::{ErrorCode, NoCallbacks, ToolContext};
use data_plane_store::content::{self, DocumentEntry};
use rmcp::ErrorData as McpError;
use rmcp::model::{
    CompleteRequestParams, CompletionInfo, ListResourceTemplatesResult, ListResourcesResult,
    MetaObject, PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse,
    ReadResourceResult, Resource, ResourceContents, ResourceTemplate,
};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::json;
use uuid::Uuid;

use super::{McpServer, call_id, commit, store_fault};

impl McpServer {
    /// Up to `limit` documents of `space` that the caller may read, in
    /// path order: a page, or those at (or beginning with) a path.
    pub(super) async fn entries(
        &self,
        ctx: &ToolContext,
        space: Uuid,
        which: Entries<'_>,
        limit: i64,
    ) -> Result<Vec<DocumentEntry>, McpError> {
        let mut tx = self.scoped(ctx.user_id).await?;
        let found = match which {
            Entries::After(after) => content::document_entries(&mut tx, space, after, limit).await,
            Entries::AtPath(path, prefix) => {
                content::document_entries_by_path(&mut tx, space, path, prefix, limit).await
            }
        }
        .map_err(store_fault)?;
        commit(tx).await?;
        Ok(found)
    }

    /// Whether the context may read documents at all (read_document is
    /// offered): resources and completions follow it.
    pub(super) fn reads_documents(&self, ctx: &ToolContext) -> bool {
        self.state
            .registry
            .available_entries(ctx)
            .iter()
            .any(|e| e.name == READ_DOCUMENT)
    }

    /// A prompt's document argument as a resource URI: a URI as it is, an
    /// id or a path in the endpoint's space as that document's.
    pub(super) async fn document_uri(
        &self,
        ctx: &ToolContext,
        document: String,
    ) -> Result<String, McpError> {
        if document.starts_with("data-plane://") {
            return Ok(document);
        }
        let Some(space) = ctx.space_id else {
            return Err(McpError::invalid_params(
                format!(
                    "{document:?}: without a space on the endpoint, name a document by its resource URI"
                ),
                None,
            ));
        };
        if let Ok(id) = Uuid::parse_str(&document) {
            return Ok(document_uri(space, id));
        }
        let id = self.document_at(ctx, space, &document).await?;
        Ok(document_uri(space, id))
    }

    /// A document (or a range of its characters) by its resource URI, read
    /// as `resources/read` reads it (see [`McpServer::resource_read`]).
    pub(super) async fn read_text(
        &self,
        rq: &RequestContext<RoleServer>,
        uri: String,
    ) -> Result<ResourceContents, McpError> {
        let named = Named::parse(&uri).map_err(|why| {
            McpError::invalid_params(
                format!("{uri:?} names no document ({why}): resources here are {DOCUMENT_URI}, {BY_PATH} and {RANGE}"),
                None,
            )
        })?;
        // Not named back: a path may be a guess at what another space holds.
        let not_found =
            || McpError::resource_not_found("no such document that you may read here", None);
        // A space the caller does not read is not found, like a document.
        let ctx = self
            .tool_context_in(rq, Some(named.space))
            .await
            .map_err(|e| {
                if e.code == rmcp::model::ErrorCode::INTERNAL_ERROR {
                    e
                } else {
                    not_found()
                }
            })?;
        if ctx.space_id != Some(named.space) {
            return Err(not_found());
        }
        let id = match &named.document {
            Document::Id(id) => *id,
            Document::Path(path) => self.document_at(&ctx, named.space, path).await?,
        };
        let (start, max_length) = match named.range {
            None => (0, RESOURCE_MAX_CHARS),
            Some(Range { start, end }) => (
                start,
                end.map_or(RESOURCE_MAX_CHARS, |end| {
                    (end - start).min(RESOURCE_MAX_CHARS)
                }),
            ),
        };
        let ctx = ctx.with_call_id(call_id());
        let args = json!({ "document_id": id, "start": start, "max_length": max_length });
        let result = self
            .state
            .registry
            .execute_tool(READ_DOCUMENT, args, &ctx, &NoCallbacks)
            .await;
        self.state.metrics.tool_call(&result);
        let read = match (&result.data, &result.error) {
            (Some(data), None) if result.success => data,
            (_, Some(e)) if e.code == ErrorCode::NotFound => return Err(not_found()),
            (_, Some(e)) if e.retryable => {
                return Err(McpError::internal_error(e.message.clone(), None));
            }
            (_, Some(e)) if e.code == ErrorCode::InvalidArguments => {
                return Err(McpError::invalid_params(e.message.clone(), None));
            }
            (_, Some(e)) => return Err(McpError::invalid_request(e.message.clone(), None)),
            _ => {
                return Err(McpError::internal_error(
                    "the document could not be read",
                    None,
                ));
            }
        };
        let text = read["text"].as_str().unwrap_or_default().to_string();
        let total = read["total_chars"].as_u64().unwrap_or(0);
        let returned = read["end"].as_u64().unwrap_or(0);
        // Cut short of what was asked for: the whole text, or the range's
        // end where it lies inside the text.
        let wanted = named
            .range
            .and_then(|r| r.end)
            .map_or(total, |end| end.min(total));
        let mut meta = serde_json::Map::new();
        if returned < wanted {
            meta.insert("truncated".into(), json!(true));
            meta.insert(
                "returnedChars".into(),
                json!(returned - start.min(returned)),
            );
        }
        if named.range.is_some() || returned < wanted {
            meta.insert("totalChars".into(), json!(total));
        }
        if named.range.is_some() {
            meta.insert("start".into(), read["start"].clone());
            meta.insert("end".into(), json!(returned));
        }
        let contents = ResourceContents::TextResourceContents {
            uri,
            mime_type: Some("text/plain".into()),
            text,
            meta: (!meta.is_empty()).then_some(MetaObject(meta)),
        };
        Ok(contents)
    }

    /// The one document at `path` in `space` that the caller may read.
    pub(super) async fn document_at(
        &self,
        ctx: &ToolContext,
        space: Uuid,
        path: &str,
    ) -> Result<Uuid, McpError> {
        let found = self
            .entries(ctx, space, Entries::AtPath(path, false), 2)
            .await?;
        match found.as_slice() {
            [one] => Ok(one.id),
            [] => Err(McpError::resource_not_found(
                "no document at that path that you may read here",
                None,
            )),
            _ => Err(McpError::invalid_params(
                format!(
                    "several documents have the path {path:?} (in different sources): name one by its resource URI"
                ),
                None,
            )),
        }
    }

    /// The documents of the endpoint's space the caller may read, a page
    /// at a time in path order; without a space, none (as tools that need
    /// one are not listed).
    pub(super) async fn resource_page(
        &self,
        request: Option<PaginatedRequestParams>,
        rq: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let ctx = self.tool_context(&rq).await?;
        // Listed only where they can be read: a profile or a setting that
        // takes read_document away takes the resources too.
        let Some(space) = ctx.space_id.filter(|_| self.reads_documents(&ctx)) else {
            return Ok(ListResourcesResult::default());
        };
        let after = match request.and_then(|r| r.cursor) {
            Some(cursor) => Some(read_cursor(&cursor)?),
            None => None,
        };
        let after = after.as_ref().map(|(id, path)| (path.as_str(), *id));
        let mut entries = self
            .entries(&ctx, space, Entries::After(after), RESOURCES_PAGE + 1)
            .await?;
        let more = entries.len() > RESOURCES_PAGE as usize;
        entries.truncate(RESOURCES_PAGE as usize);
        let next = more
            .then(|| entries.last().map(|d| format!("{}/{}", d.id, d.path)))
            .flatten();
        let mut result =
            ListResourcesResult::with_all_items(entries.iter().map(resource).collect());
        result.next_cursor = next;
        Ok(result)
    }

    /// A document's extracted text by its URI: a call of read_document
    /// (the same profile, settings, gate, limits and audit as any call,
    /// under the caller's row-level security), in the URI's space, which
    /// must be the endpoint's when it names one. A longer document than
    /// one read returns is cut, its `_meta` saying where.
    pub(super) async fn resource_read(
        &self,
        request: ReadResourceRequestParams,
        rq: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let contents = self.read_text(&rq, request.uri).await?;
        Ok(ReadResourceResult::new(vec![contents]).into())
    }

    /// The templates a client fills in to name a document itself: by its
    /// path, and a range of its characters; none where documents cannot
    /// be read.
    pub(super) async fn resource_templates(
        &self,
        rq: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        let ctx = self.tool_context(&rq).await?;
        if !self.reads_documents(&ctx) {
            return Ok(ListResourceTemplatesResult::default());
        }
        let templates = vec![
            ResourceTemplate::new(BY_PATH, "document_by_path")
                .with_title("A document by its path")
                .with_description(
                    "The extracted text of the document at a path in a space (the space's id, then the path; both complete as you type).",
                )
                .with_mime_type("text/plain"),
            ResourceTemplate::new(RANGE, "document_range")
                .with_title("A range of a document")
                .with_description(
                    "Characters start (from 0) to end (not included) of the document at a path: what search results cite.",
                )
                .with_mime_type("text/plain"),
        ];
        Ok(ListResourceTemplatesResult::with_all_items(templates))
    }

    /// Completes a template's arguments: `space_id` with the endpoint's
    /// space (else the spaces the caller reads), `path` with the paths of
    /// that space's documents that begin with what was typed (case aside),
    /// as far as the caller may read them; `start` and `end` with nothing.
    pub(super) async fn complete_template(
        &self,
        template: &str,
        request: &CompleteRequestParams,
        ctx: &ToolContext,
    ) -> Result<Vec<String>, McpError> {
        if ![BY_PATH, RANGE].contains(&template) {
            return Err(McpError::invalid_params(
                format!("no resource template {template:?}; resources/templates/list names them"),
                None,
            ));
        }
        if !self.reads_documents(ctx) {
            return Ok(Vec::new());
        }
        let typed = request.argument.value.trim();
        let given = |name: &str| {
            request
                .context
                .as_ref()
                .and_then(|c| c.arguments.as_ref())
                .and_then(|a| a.get(name))
                .map(|v| v.trim().to_string())
        };
        match request.argument.name.as_str() {
            "space_id" => {
                let spaces = match ctx.space_id {
                    Some(space) => vec![space],
                    None => self.readable_spaces(ctx, typed).await?,
                };
                Ok(spaces
                    .into_iter()
                    .map(|s| s.to_string())
                    .filter(|s| s.starts_with(typed))
                    .collect())
            }
            "path" => {
                // The space already chosen, else the endpoint's; either must
                // be one the endpoint may read.
                let space = match given("space_id") {
                    Some(text) => text
                        .parse::<Uuid>()
                        .ok()
                        .filter(|s| ctx.space_id.is_none_or(|endpoint| endpoint == *s)),
                    None => ctx.space_id,
                };
                let Some(space) = space else {
                    return Ok(Vec::new());
                };
                let found = self
                    .entries(ctx, space, Entries::AtPath(typed, true), COMPLETIONS + 1)
                    .await?;
                Ok(paths(found))
            }
            _ => Ok(Vec::new()),
        }
    }

    /// The spaces the caller reads whose id begins with `typed`, in id
    /// order.
    async fn readable_spaces(&self, ctx: &ToolContext, typed: &str) -> Result<Vec<Uuid>, McpError> {
        let mut tx = self.scoped(ctx.user_id).await?;
        let spaces = content::readable_space_ids(&mut tx, typed, COMPLETIONS + 1)
            .await
            .map_err(store_fault)?;
        commit(tx).await?;
        Ok(spaces)
    }
}

/// The paths of documents in path order, each once (two sources may
/// hold the same path).
pub(super) fn paths(found: Vec<DocumentEntry>) -> Vec<String> {
    let mut paths: Vec<String> = found.into_iter().map(|d| d.path).collect();
    paths.dedup();
    paths
}

/// At most this many completions are looked up, one more than are sent, so
/// that `hasMore` can be told.
pub(super) const COMPLETIONS: i64 = CompletionInfo::MAX_VALUES as i64;

/// Documents per `resources/list` page.
const RESOURCES_PAGE: i64 = 100;

/// The tool a resource is read with.
const READ_DOCUMENT: &str = "read_document";

/// The most characters `resources/read` returns of one document: what one
/// read_document call returns at most.
const RESOURCE_MAX_CHARS: u64 = data_plane_handlers::MAX_READ_CHARS;

/// Which documents [`McpServer::entries`] reads.
pub(super) enum Entries<'a> {
    /// The page after this (path, id).
    After(Option<(&'a str, Uuid)>),
    /// At this path, or (`true`) beginning with it.
    AtPath(&'a str, bool),
}

/// How a document is named as a resource.
const DOCUMENT_URI: &str = "data-plane://spaces/{space_id}/documents/{document_id}";

/// A document's own URI ([`DOCUMENT_URI`]).
pub(super) fn document_uri(space: Uuid, document: Uuid) -> String {
    format!("data-plane://spaces/{space}/documents/{document}")
}

/// A document as a resource: its URI, its path as the name, its title
/// (else the file's name), and the size of the text a read returns.
fn resource(d: &DocumentEntry) -> Resource {
    let title = d
        .title
        .clone()
        .filter(|t| !t.trim().is_empty())
        .unwrap_or_else(|| d.path.rsplit('/').next().unwrap_or(&d.path).to_string());
    Resource::new(document_uri(d.space_id, d.id), d.path.clone())
        .with_title(title)
        .with_mime_type("text/plain")
        .with_size(u64::try_from(d.text_bytes).unwrap_or(0))
}

/// A document by its path. RFC 6570's simple expansion encodes every
/// reserved character of the path (`/` as `%2F`, `#`, `?`, `%`), and a read
/// decodes them; a path written with plain `/` reads the same.
const BY_PATH: &str = "data-plane://spaces/{space_id}/paths/{path}";

/// A range of a document's characters, by its path.
const RANGE: &str = "data-plane://spaces/{space_id}/paths/{path}{?start,end}";

/// What a resource URI names: a document of a space, by id or by path,
/// and perhaps a range of its characters (`?start=N&end=M`, either given
/// alone).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Named {
    pub(super) space: Uuid,
    pub(super) document: Document,
    range: Option<Range>,
}

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Document {
    Id(Uuid),
    Path(String),
}

/// Characters `start` to `end` (not included; `None`: as far as one read
/// returns).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Range {
    start: u64,
    end: Option<u64>,
}

impl Named {
    /// Reads a URI of ours; why not, when it is not one. Read as written:
    /// no dot segment is resolved (a path holding one is refused), and a
    /// fragment is no part of a document.
    pub(super) fn parse(uri: &str) -> Result<Named, String> {
        let rest = uri
            .strip_prefix("data-plane://spaces/")
            .ok_or("not a data-plane://spaces/ URI")?;
        if rest.contains('#') {
            return Err("a fragment (#) names no part of a document".into());
        }
        let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (space, rest) = path.split_once('/').ok_or("no document after the space")?;
        let space = space
            .parse::<Uuid>()
            .map_err(|_| format!("{space:?} is not a space id"))?;
        let document = if let Some(id) = rest.strip_prefix("documents/") {
            Document::Id(
                id.parse()
                    .map_err(|_| format!("{id:?} is not a document id"))?,
            )
        } else if let Some(path) = rest.strip_prefix("paths/").filter(|p| !p.is_empty()) {
            let path = percent_encoding::percent_decode_str(path)
                .decode_utf8()
                .map_err(|_| "the path is not UTF-8 once decoded")?;
            if path
                .split('/')
                .any(|segment| segment == "." || segment == "..")
            {
                return Err("a path holds no . or .. segment".into());
            }
            Document::Path(path.into_owned())
        } else {
            return Err("neither documents/ID nor paths/PATH after the space".into());
        };
        let mut range = None::<Range>;
        for (key, value) in url::form_urlencoded::parse(query.as_bytes()) {
            let number = value
                .parse::<u64>()
                .map_err(|_| format!("{key}={value:?} is not a character offset"))?;
            let r = range.get_or_insert(Range {
                start: 0,
                end: None,
            });
            match key.as_ref() {
                "start" => r.start = number,
                "end" => r.end = Some(number),
                other => return Err(format!("{other:?} is not start or end")),
            }
        }
        if let Some(Range {
            start,
            end: Some(end),
        }) = range
            && end <= start
        {
            return Err(format!(
                "the range ends ({end}) where it starts ({start}) or before"
            ));
        }
        Ok(Named {
            space,
            document,
            range,
        })
    }
}

/// A `resources/list` cursor: the last document of the page before, as
/// `ID/PATH`.
fn read_cursor(cursor: &str) -> Result<(Uuid, String), McpError> {
    cursor
        .split_once('/')
        .and_then(|(id, path)| Some((id.parse().ok()?, path.to_string())))
        .ok_or_else(|| {
            McpError::invalid_params(format!("{cursor:?} is not a cursor this server gave"), None)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_uris_name_a_document_by_id_or_path_and_perhaps_a_range() {
        let space = Uuid::from_u128(1);
        let doc = Uuid::from_u128(2);
        let check = |uri: &str, expected: Result<(Document, Option<Range>), &str>| {
            let got = Named::parse(uri);
            match expected {
                Ok((document, range)) => assert_eq!(
                    got,
                    Ok(Named {
                        space,
                        document,
                        range
                    }),
                    "{uri}"
                ),
                Err(why) => {
                    let e = got.expect_err(uri);
                    assert!(e.contains(why), "{uri}: {e}");
                }
            }
        };
        let s = format!("data-plane://spaces/{space}");
        let r = |start, end| Some(Range { start, end });
        check(
            &format!("{s}/documents/{doc}"),
            Ok((Document::Id(doc), None)),
        );
        check(
            &format!("{s}/documents/{doc}?start=5&end=9"),
            Ok((Document::Id(doc), r(5, Some(9)))),
        );
        check(
            &format!("{s}/paths/guides/vacuum.md"),
            Ok((Document::Path("guides/vacuum.md".into()), None)),
        );
        // What RFC 6570's {path} encodes is decoded, a `/` included.
        check(
            &format!("{s}/paths/notes%2Fcaf%C3%A9%20menu.md?end=40"),
            Ok((Document::Path("notes/café menu.md".into()), r(0, Some(40)))),
        );
        check(
            &format!("{s}/paths/notes/C%23%20and%20%3F.md"),
            Ok((Document::Path("notes/C# and ?.md".into()), None)),
        );
        check(
            &format!("{s}/paths/100%2541.md"),
            Ok((Document::Path("100%41.md".into()), None)),
        );
        // Read as written: no dot segment, no fragment.
        check(&format!("{s}/paths/a/../b.md"), Err("no . or .. segment"));
        check(
            &format!("{s}/paths/a/%2E%2E/b.md"),
            Err("no . or .. segment"),
        );
        check(
            &format!("{s}/paths/x/../../../{space}/documents/{doc}"),
            Err("no . or .. segment"),
        );
        check(&format!("{s}/paths/notes/C#.md"), Err("fragment"));
        check(
            &format!("{s}/paths/a.md?start=12"),
            Ok((Document::Path("a.md".into()), r(12, None))),
        );
        check(
            &format!("{s}/paths/a.md?start=9&end=9"),
            Err("where it starts"),
        );
        check(
            &format!("{s}/paths/a.md?start=-1"),
            Err("not a character offset"),
        );
        check(&format!("{s}/paths/a.md?limit=3"), Err("not start or end"));
        check(&format!("{s}/paths/"), Err("neither"));
        check(&format!("{s}/documents/nope"), Err("not a document id"));
        check(
            "data-plane://spaces/nope/documents/x",
            Err("not a space id"),
        );
        check("https://spaces/x", Err("not a data-plane"));
        check("data-plane://other/x", Err("not a data-plane"));
    }
}
