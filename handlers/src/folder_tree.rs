//! folder_tree: folder hierarchy of a source with counts.

use std::collections::HashMap;
use std::time::Duration;

use data_plane_registry::{
    AnnotationHints, Callbacks, Category, CostTier, Permission, RateLimits, ToolContext, ToolError,
    ToolMeta,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::Deps;
use crate::deps::internal;
use crate::list_folder_contents::{resolve_folder, shown};

/// The arguments, as definitions/folder_tree.json describes them.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// The source whose folders to show (from list_sources).
    pub source_id: Uuid,
    /// Folder to start from; empty or `/` for the top.
    pub path: Option<String>,
    /// How many levels below the start folder to show.
    pub max_depth: Option<u64>,
}

pub const META: ToolMeta = ToolMeta {
    category: Category::Navigation,
    short_description: "folder hierarchy of a source with counts",
    available_when: "a space is selected",
    aliases: &["tree"],
    annotations: AnnotationHints::DERIVED,
    cost: CostTier::Cheap,
    permission: Permission::Guest,
    timeout: Duration::from_millis(10000),
    limits: RateLimits::NONE,
    requires_gate: false,
    defer_loading: false,
    tag: None,
};

pub fn available(ctx: &ToolContext) -> bool {
    ctx.space_id.is_some()
}

const DEFAULT_DEPTH: u64 = 3;
const MAX_DEPTH: u64 = 10;
/// Most folders one answer shows: past this a tree costs the model more to
/// read than listing the part it wants.
pub const MAX_NODES: usize = 200;

/// One folder of the tree.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Node {
    pub name: String,
    pub path: String,
    /// Documents directly inside.
    pub documents: i64,
    /// Documents in this folder and every folder below it, shown or not.
    pub total_documents: i64,
    /// Sub-folders directly inside, shown or not.
    pub folders: i64,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<Node>,
    /// Why folders below this one are missing from `children`:
    /// "max_depth" (the depth asked for ends here) or "node_cap" (the answer
    /// reached its size limit).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cut: Option<&'static str>,
    /// Folders below this one that the tree leaves out (not counting those
    /// left out below a shown child, which says so itself).
    #[serde(skip_serializing_if = "is_zero")]
    pub hidden_folders: i64,
    /// Folders below this one, shown or hidden.
    #[serde(skip)]
    descendants: i64,
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Output {
    pub source_id: Uuid,
    pub source: String,
    pub path: String,
    pub max_depth: u64,
    /// Folders shown.
    pub nodes: usize,
    /// Folders in the whole subtree, the start folder included.
    pub total_folders: i64,
    /// True when the tree was cut at MAX_NODES folders.
    pub node_cap_reached: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    pub tree: Node,
}

#[derive(Debug)]
struct Row {
    id: Uuid,
    parent_id: Option<Uuid>,
    name: String,
    path: String,
    depth: i32,
    documents: i64,
    total_documents: i64,
    descendants: i64,
    folders: i64,
}
data_plane_store::from_row!(Row {
    id,
    parent_id,
    name,
    path,
    depth,
    documents,
    total_documents,
    descendants,
    folders
});

/// One query for the whole subtree. The walk goes to the bottom so the totals
/// cover folders below max_depth too; `shown` carries each folder's ancestors
/// that lie within max_depth (and the folder itself when it does), so
/// unnesting it credits every document to each shown folder above it.
/// The depth guard only protects against a corrupt parent cycle.
const TREE_SQL: &str = "
WITH RECURSIVE walk AS (
    SELECT f.id, f.parent_id, f.name, f.path, 0 AS depth, ARRAY[f.id] AS shown
      FROM folders f
     WHERE f.id = $1
    UNION ALL
    SELECT c.id, c.parent_id, c.name, c.path, w.depth + 1,
           CASE WHEN w.depth < $2 THEN w.shown || c.id ELSE w.shown END
      FROM walk w
      JOIN folders c ON c.parent_id = w.id
     WHERE w.depth < 10000
),
counted AS (
    SELECT w.*, (SELECT count(*) FROM documents d WHERE d.folder_id = w.id) AS documents
      FROM walk w
),
totals AS (
    SELECT s.node, sum(c.documents)::bigint AS total_documents,
           (count(*) - 1)::bigint AS descendants
      FROM counted c, unnest(c.shown) AS s(node)
     GROUP BY s.node
)
SELECT c.id, c.parent_id, c.name, c.path, c.depth, c.documents,
       t.total_documents, t.descendants,
       (SELECT count(*) FROM folders k WHERE k.parent_id = c.id) AS folders
  FROM counted c
  JOIN totals t ON t.node = c.id
 WHERE c.depth <= $2
 ORDER BY c.depth, c.path
 LIMIT $3";

pub async fn run(
    deps: &Deps,
    args: Args,
    ctx: &ToolContext,
    _callbacks: &dyn Callbacks,
) -> Result<Output, ToolError> {
    let max_depth = args.max_depth.unwrap_or(DEFAULT_DEPTH).clamp(1, MAX_DEPTH);
    let mut tx = deps.read(NAME, ctx).await?;
    let start = resolve_folder(
        NAME,
        deps,
        &mut tx,
        ctx,
        args.source_id,
        args.path.as_deref(),
    )
    .await?;
    // The planner cannot see how small the walk is and estimates it high
    // enough to JIT-compile it, which costs more than the query (0.9 s of
    // compilation for 0.2 s of work over 20,000 folders); local to this
    // transaction, so the pooled connection keeps its defaults.
    sqlx::query("SET LOCAL jit = off")
        .execute(&mut *tx)
        .await
        .map_err(|e| internal(NAME, e))?;
    // Level by level, names in order within a parent: a cut keeps the upper
    // levels whole, and one row more than the cap says whether it cut.
    let mut rows: Vec<Row> = sqlx::query_as(TREE_SQL)
        .bind(start.id)
        .bind(max_depth as i32)
        .bind(MAX_NODES as i64 + 1)
        .fetch_all(&mut *tx)
        .await
        .map_err(|e| internal(NAME, e))?;
    let node_cap_reached = rows.len() > MAX_NODES;
    rows.truncate(MAX_NODES);
    let nodes = rows.len();
    let total_folders = rows.first().map_or(1, |r| r.descendants + 1);
    let Some(tree) = assemble(rows, max_depth as i32) else {
        return Err(internal(
            NAME,
            "the start folder vanished from its own tree",
        ));
    };
    let note = node_cap_reached.then(|| {
        format!(
            "the tree below {} has {total_folders} folders; only the first {MAX_NODES} level by level are shown; ask for a sub-folder's path or a smaller max_depth to see the rest",
            shown(&start.path)
        )
    });
    Ok(Output {
        source_id: start.source_id,
        source: start.source,
        path: start.path,
        max_depth,
        nodes,
        total_folders,
        node_cap_reached,
        note,
        tree,
    })
}

/// Builds the nested tree from rows in level order (parents before children).
fn assemble(rows: Vec<Row>, max_depth: i32) -> Option<Node> {
    let mut children: HashMap<Uuid, Vec<usize>> = HashMap::new();
    for (i, row) in rows.iter().enumerate().skip(1) {
        if let Some(parent) = row.parent_id {
            children.entry(parent).or_default().push(i);
        }
    }
    let mut slots: Vec<Option<Row>> = rows.into_iter().map(Some).collect();
    build(0, &mut slots, &children, max_depth)
}

fn build(
    i: usize,
    slots: &mut [Option<Row>],
    children: &HashMap<Uuid, Vec<usize>>,
    max_depth: i32,
) -> Option<Node> {
    let row = slots.get_mut(i)?.take()?;
    let kids: Vec<Node> = children
        .get(&row.id)
        .map(|ids| {
            ids.iter()
                .filter_map(|&k| build(k, slots, children, max_depth))
                .collect()
        })
        .unwrap_or_default();
    let accounted: i64 = kids.iter().map(|k| k.descendants + 1).sum();
    let hidden_folders = row.descendants - accounted;
    let cut = (hidden_folders > 0).then_some(if row.depth >= max_depth {
        "max_depth"
    } else {
        "node_cap"
    });
    Some(Node {
        name: row.name,
        path: row.path,
        documents: row.documents,
        total_documents: row.total_documents,
        folders: row.folders,
        children: kids,
        cut,
        hidden_folders,
        descendants: row.descendants,
    })
}

const NAME: &str = "folder_tree";
