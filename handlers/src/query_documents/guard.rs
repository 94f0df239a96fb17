//! The parse layer of query_documents: accepts exactly one plain SELECT that
//! reads only the document's tables and the CTEs it defines, calls only
//! allow-listed built-in functions, and prints it back as the SQL that runs.
//!
//! Every AST node is matched explicitly and anything not listed is refused, so
//! a construct this version of sqlparser learns later is refused until someone
//! looks at it. What runs is the checked tree printed back (and re-parsed to the
//! same tree), never the caller's text, so comments and tokenizer quirks
//! cannot smuggle anything past the check.

use std::cell::RefCell;
use std::collections::BTreeSet;

use sqlparser::ast::{
    AccessExpr, CastKind, CeilFloorKind, Cte, DataType, Distinct, Expr, Fetch, Function,
    FunctionArg, FunctionArgExpr, FunctionArgumentClause, FunctionArgumentList, FunctionArguments,
    GroupByExpr, Ident, Join, JoinConstraint, JoinOperator, LimitClause, NamedWindowDefinition,
    NamedWindowExpr, ObjectName, ObjectNamePart, Offset, OrderBy, OrderByExpr, OrderByKind,
    OrderBySort, Query, Select, SelectFlavor, SelectItem, SelectItemQualifiedWildcardKind, SetExpr,
    Statement, Subscript, TableAlias, TableFactor, TableWithJoins, Value, WindowFrame,
    WindowFrameBound, WindowSpec, WindowType, With,
};
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::parser::Parser;

/// How deep expressions and subqueries may nest. The parser bounds its own
/// recursion, but a long left-associative chain (`1+1+1+…`) is built by a loop
/// and can be thousands deep; walking or printing that would risk the stack.
const MAX_DEPTH: usize = 100;

/// sqlparser's own bound on nested parentheses and subqueries.
const PARSER_RECURSION_LIMIT: usize = 50;

/// Built-in functions a query may call: aggregates, window functions, math,
/// strings, dates, conditionals, arrays and JSON builders. All of them only
/// compute from their arguments; none reads files, the catalog or settings,
/// sleeps, locks, writes, or runs SQL of its own. Left out on purpose, beside
/// everything that reaches outside: repeat, lpad and rpad (one call builds a
/// value of any size), generate_series (rows from nothing: the tool answers
/// questions about the document's rows), setseed (changes session state).
const ALLOWED_FUNCTIONS: &[&str] = &[
    // aggregates
    "array_agg",
    "avg",
    "bit_and",
    "bit_or",
    "bool_and",
    "bool_or",
    "corr",
    "count",
    "covar_pop",
    "covar_samp",
    "every",
    "grouping",
    "json_agg",
    "json_object_agg",
    "jsonb_agg",
    "jsonb_object_agg",
    "max",
    "min",
    "mode",
    "percentile_cont",
    "percentile_disc",
    "regr_avgx",
    "regr_avgy",
    "regr_count",
    "regr_intercept",
    "regr_r2",
    "regr_slope",
    "regr_sxx",
    "regr_sxy",
    "regr_syy",
    "stddev",
    "stddev_pop",
    "stddev_samp",
    "string_agg",
    "sum",
    "var_pop",
    "var_samp",
    "variance",
    // window functions
    "cume_dist",
    "dense_rank",
    "first_value",
    "lag",
    "last_value",
    "lead",
    "nth_value",
    "ntile",
    "percent_rank",
    "rank",
    "row_number",
    // math
    "abs",
    "acos",
    "asin",
    "atan",
    "atan2",
    "cbrt",
    "ceil",
    "ceiling",
    "cos",
    "cot",
    "degrees",
    "div",
    "exp",
    "floor",
    "gcd",
    "lcm",
    "ln",
    "log",
    "log10",
    "mod",
    "pi",
    "power",
    "radians",
    "random",
    "round",
    "scale",
    "sign",
    "sin",
    "sqrt",
    "tan",
    "trunc",
    "width_bucket",
    // strings
    "ascii",
    "btrim",
    "char_length",
    "character_length",
    "chr",
    "concat",
    "concat_ws",
    "format",
    "initcap",
    "left",
    "length",
    "lower",
    "ltrim",
    "md5",
    "octet_length",
    "regexp_count",
    "regexp_instr",
    "regexp_like",
    "regexp_match",
    "regexp_matches",
    "regexp_replace",
    "regexp_split_to_array",
    "regexp_substr",
    "replace",
    "reverse",
    "right",
    "rtrim",
    "split_part",
    "starts_with",
    "strpos",
    "substr",
    "to_hex",
    "translate",
    "upper",
    // dates and times
    "age",
    "current_date",
    "current_time",
    "current_timestamp",
    "date_bin",
    "date_part",
    "date_trunc",
    "isfinite",
    "justify_days",
    "justify_hours",
    "justify_interval",
    "localtime",
    "localtimestamp",
    "make_date",
    "make_interval",
    "make_time",
    "make_timestamp",
    "make_timestamptz",
    "now",
    "timezone",
    "to_char",
    "to_date",
    "to_number",
    "to_timestamp",
    // conditionals
    "coalesce",
    "greatest",
    "least",
    "nullif",
    "num_nonnulls",
    "num_nulls",
    // arrays
    "array",
    "array_append",
    "array_cat",
    "array_length",
    "array_lower",
    "array_position",
    "array_positions",
    "array_prepend",
    "array_remove",
    "array_to_string",
    "array_upper",
    "cardinality",
    "string_to_array",
    "unnest",
    // JSON
    "json_build_array",
    "json_build_object",
    "jsonb_build_array",
    "jsonb_build_object",
    "jsonb_typeof",
    "json_typeof",
    "to_json",
    "to_jsonb",
];

/// Types a value may be cast to (as sqlparser prints them, lowercase, without
/// length or precision): plain data types whose casts only convert. Left out:
/// the reg* types (their input functions look up catalog names) and anything
/// user-defined.
const ALLOWED_TYPES: &[&str] = &[
    "bigint",
    "bool",
    "boolean",
    "char",
    "character",
    "character varying",
    "date",
    "dec",
    "decimal",
    "double precision",
    "float",
    "float4",
    "float8",
    "int",
    "int2",
    "int4",
    "int8",
    "integer",
    "interval",
    "json",
    "jsonb",
    "numeric",
    "real",
    "smallint",
    "text",
    "time",
    "time with time zone",
    "time without time zone",
    "timestamp",
    "timestamp with time zone",
    "timestamp without time zone",
    "timestamptz",
    "uuid",
    "varchar",
];

/// Bare words PostgreSQL reads as functions of the session (who is connected,
/// to what) although sqlparser sees plain identifiers in them.
const SESSION_KEYWORDS: &[&str] = &[
    "current_catalog",
    "current_role",
    "current_schema",
    "current_user",
    "session_user",
    "system_user",
    "user",
];

/// Why a query was refused, in words the model can act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal(pub String);

type Checked = Result<(), Refusal>;

fn refuse<T>(message: impl Into<String>) -> Result<T, Refusal> {
    Err(Refusal(message.into()))
}

/// Checks `sql` against the rules above with `tables` (the document's table
/// names, exactly as stored) as the only relations it may read, and returns
/// the canonical text of the query that is to run.
pub fn check(sql: &str, tables: &[String]) -> Result<String, Refusal> {
    check_reading(sql, tables).map(|(query, _)| query)
}

/// [`check`], also returning the document's tables the query reads
/// (alphabetically; CTEs of the same name shadow a table and are not it).
pub fn check_reading(sql: &str, tables: &[String]) -> Result<(String, Vec<String>), Refusal> {
    let dialect = PostgreSqlDialect {};
    let statements = Parser::new(&dialect)
        .with_recursion_limit(PARSER_RECURSION_LIMIT)
        .try_with_sql(sql)
        .and_then(|mut p| p.parse_statements())
        .map_err(|e| {
            Refusal(format!(
                "the sql does not parse ({e}); write one PostgreSQL SELECT statement"
            ))
        })?;
    let query = match statements.as_slice() {
        [] => return refuse("the sql holds no statement; write one SELECT statement"),
        [Statement::Query(query)] => query,
        [other] => {
            let shown = other.to_string();
            let verb = shown.split_whitespace().next().unwrap_or("this");
            return refuse(format!(
                "only a SELECT query may run, not {verb}: query_documents only reads the document's tables"
            ));
        }
        many => {
            return refuse(format!(
                "the sql holds {} statements; query_documents runs exactly one SELECT",
                many.len()
            ));
        }
    };
    let mut guard = Guard {
        tables,
        depth: 0,
        read: RefCell::default(),
    };
    guard.query(query, &[])?;
    let read: Vec<String> = guard.read.into_inner().into_iter().collect();

    let canonical = query.to_string();
    let reparsed = Parser::new(&dialect)
        .with_recursion_limit(PARSER_RECURSION_LIMIT)
        .try_with_sql(&canonical)
        .and_then(|mut p| p.parse_statements());
    match reparsed.as_deref() {
        Ok([Statement::Query(again)]) if again == query => Ok((canonical, read)),
        _ => refuse(
            "the query could not be checked safely (it does not print back to itself); \
             write it more plainly",
        ),
    }
}

struct Guard<'a> {
    tables: &'a [String],
    depth: usize,
    /// The document's tables the query reads.
    read: RefCell<BTreeSet<String>>,
}

/// An identifier as PostgreSQL resolves it: unquoted names fold to lower case,
/// quoted ones are taken as written.
fn fold(ident: &Ident) -> Result<String, Refusal> {
    match ident.quote_style {
        None => Ok(ident.value.to_ascii_lowercase()),
        Some('"') => Ok(ident.value.clone()),
        Some(q) => refuse(format!(
            "identifier {ident} is quoted with {q}; PostgreSQL quotes identifiers with double quotes"
        )),
    }
}

/// The single identifier of an unqualified name, or a refusal naming it.
fn single(name: &ObjectName, what: &str) -> Result<Ident, Refusal> {
    match name.0.as_slice() {
        [ObjectNamePart::Identifier(ident)] => Ok(ident.clone()),
        _ => refuse(format!(
            "schema-qualified {what} {name} is not allowed; name only the document's tables and the query's own CTEs"
        )),
    }
}

/// A short rendering of a node for error messages.
fn snippet(node: &impl std::fmt::Display) -> String {
    let text = node.to_string();
    if text.chars().count() > 60 {
        let cut: String = text.chars().take(60).collect();
        format!("{cut}…")
    } else {
        text
    }
}

fn unsupported(node: &impl std::fmt::Display) -> Refusal {
    Refusal(format!(
        "{} is not supported by query_documents; use plain PostgreSQL SELECT syntax",
        snippet(node)
    ))
}

impl Guard<'_> {
    fn enter(&mut self) -> Checked {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return refuse(format!(
                "the query nests too deeply (more than {MAX_DEPTH} levels of expressions and subqueries); simplify it"
            ));
        }
        Ok(())
    }

    fn leave(&mut self) {
        self.depth -= 1;
    }

    fn query(&mut self, query: &Query, outer: &[String]) -> Checked {
        self.enter()?;
        let Query {
            with,
            body,
            order_by,
            limit_clause,
            fetch,
            locks,
            for_clause,
            settings,
            format_clause,
            pipe_operators,
        } = query;
        if !locks.is_empty() {
            return refuse(
                "FOR UPDATE / FOR SHARE locks rows and is not allowed: query_documents only reads",
            );
        }
        if for_clause.is_some()
            || settings.is_some()
            || format_clause.is_some()
            || !pipe_operators.is_empty()
        {
            return Err(unsupported(query));
        }
        let mut scope = outer.to_vec();
        if let Some(with) = with {
            let names = self.with(with, outer)?;
            scope.extend(names);
        }
        self.set_expr(body, &scope)?;
        if let Some(OrderBy { kind, interpolate }) = order_by {
            if interpolate.is_some() {
                return Err(unsupported(query));
            }
            match kind {
                OrderByKind::Expressions(items) => self.order_by(items, &scope)?,
                OrderByKind::All(_) => return Err(unsupported(query)),
            }
        }
        match limit_clause {
            None => {}
            Some(LimitClause::LimitOffset {
                limit,
                offset,
                limit_by,
            }) => {
                if !limit_by.is_empty() {
                    return Err(unsupported(query));
                }
                if let Some(limit) = limit {
                    self.expr(limit, &scope)?;
                }
                if let Some(Offset { value, rows: _ }) = offset {
                    self.expr(value, &scope)?;
                }
            }
            Some(LimitClause::OffsetCommaLimit { .. }) => {
                return refuse("write LIMIT n OFFSET m instead of LIMIT m, n");
            }
        }
        if let Some(Fetch {
            quantity,
            with_ties: _,
            percent: _,
        }) = fetch
            && let Some(quantity) = quantity
        {
            self.expr(quantity, &scope)?;
        }
        self.leave();
        Ok(())
    }

    /// Checks the CTEs of a WITH clause and returns the names they define.
    fn with(&mut self, with: &With, outer: &[String]) -> Result<Vec<String>, Refusal> {
        let With {
            with_token: _,
            recursive,
            cte_tables,
        } = with;
        let names = cte_tables
            .iter()
            .map(|cte| fold(&cte.alias.name))
            .collect::<Result<Vec<_>, _>>()?;
        for (i, cte) in cte_tables.iter().enumerate() {
            let Cte {
                alias,
                query,
                from,
                materialized: _,
                closing_paren_token: _,
            } = cte;
            if from.is_some() {
                return Err(unsupported(with));
            }
            self.alias(alias)?;
            // A plain WITH sees the CTEs before it; WITH RECURSIVE sees all of them.
            let visible = if *recursive { &names[..] } else { &names[..i] };
            let mut scope = outer.to_vec();
            scope.extend(visible.iter().cloned());
            self.query(query, &scope)?;
        }
        Ok(names)
    }

    fn set_expr(&mut self, body: &SetExpr, scope: &[String]) -> Checked {
        match body {
            SetExpr::Select(select) => self.select(select, scope),
            SetExpr::Query(query) => self.query(query, scope),
            SetExpr::SetOperation { left, right, .. } => {
                self.set_expr(left, scope)?;
                self.set_expr(right, scope)
            }
            SetExpr::Values(values) => {
                for row in &values.rows {
                    for expr in row.iter() {
                        self.expr(expr, scope)?;
                    }
                }
                Ok(())
            }
            SetExpr::Insert(statement)
            | SetExpr::Update(statement)
            | SetExpr::Delete(statement)
            | SetExpr::Merge(statement) => {
                let shown = statement.to_string();
                let verb = shown.split_whitespace().next().unwrap_or("this");
                refuse(format!(
                    "{verb} changes data and is not allowed, not even inside WITH: query_documents only reads"
                ))
            }
            SetExpr::Table(_) => refuse("write SELECT * FROM name instead of TABLE name"),
        }
    }

    fn select(&mut self, select: &Select, scope: &[String]) -> Checked {
        let Select {
            select_token: _,
            optimizer_hints,
            distinct,
            select_modifiers,
            top,
            top_before_distinct: _,
            projection,
            exclude,
            into,
            from,
            lateral_views,
            prewhere,
            selection,
            connect_by,
            group_by,
            cluster_by,
            distribute_by,
            sort_by,
            having,
            named_window,
            qualify,
            window_before_qualify: _,
            value_table_mode,
            flavor,
        } = select;
        if into.is_some() {
            return refuse("SELECT INTO creates a table and is not allowed; drop the INTO clause");
        }
        if !optimizer_hints.is_empty()
            || select_modifiers.is_some()
            || top.is_some()
            || exclude.is_some()
            || !lateral_views.is_empty()
            || prewhere.is_some()
            || !connect_by.is_empty()
            || !cluster_by.is_empty()
            || !distribute_by.is_empty()
            || !sort_by.is_empty()
            || qualify.is_some()
            || value_table_mode.is_some()
            || *flavor != SelectFlavor::Standard
        {
            return Err(unsupported(select));
        }
        if let Some(Distinct::On(exprs)) = distinct {
            self.exprs(exprs, scope)?;
        }
        for item in projection {
            self.select_item(item, scope)?;
        }
        for table in from {
            self.table_with_joins(table, scope)?;
        }
        if let Some(selection) = selection {
            self.expr(selection, scope)?;
        }
        match group_by {
            GroupByExpr::Expressions(exprs, modifiers) if modifiers.is_empty() => {
                self.exprs(exprs, scope)?;
            }
            _ => return Err(unsupported(group_by)),
        }
        if let Some(having) = having {
            self.expr(having, scope)?;
        }
        for NamedWindowDefinition(_, window) in named_window {
            if let NamedWindowExpr::WindowSpec(spec) = window {
                self.window_spec(spec, scope)?;
            }
        }
        Ok(())
    }

    fn select_item(&mut self, item: &SelectItem, scope: &[String]) -> Checked {
        match item {
            SelectItem::UnnamedExpr(expr) | SelectItem::ExprWithAlias { expr, alias: _ } => {
                self.expr(expr, scope)
            }
            SelectItem::Wildcard(options) => {
                if *options != Default::default() {
                    return Err(unsupported(item));
                }
                Ok(())
            }
            SelectItem::QualifiedWildcard(kind, options) => {
                if *options != Default::default() {
                    return Err(unsupported(item));
                }
                match kind {
                    SelectItemQualifiedWildcardKind::ObjectName(name) => {
                        single(name, "name").map(|_| ())
                    }
                    SelectItemQualifiedWildcardKind::Expr(expr) => self.expr(expr, scope),
                }
            }
            SelectItem::ExprWithAliases { .. } => Err(unsupported(item)),
        }
    }

    fn table_with_joins(&mut self, table: &TableWithJoins, scope: &[String]) -> Checked {
        self.table_factor(&table.relation, scope)?;
        for join in &table.joins {
            let Join {
                relation,
                global,
                join_operator,
            } = join;
            if *global {
                return Err(unsupported(join));
            }
            self.table_factor(relation, scope)?;
            let constraint = match join_operator {
                JoinOperator::Join(c)
                | JoinOperator::Inner(c)
                | JoinOperator::Left(c)
                | JoinOperator::LeftOuter(c)
                | JoinOperator::Right(c)
                | JoinOperator::RightOuter(c)
                | JoinOperator::FullOuter(c)
                | JoinOperator::CrossJoin(c) => c,
                _ => return Err(unsupported(join)),
            };
            match constraint {
                JoinConstraint::On(expr) => self.expr(expr, scope)?,
                JoinConstraint::Using(names) => {
                    for name in names {
                        single(name, "column")?;
                    }
                }
                JoinConstraint::Natural | JoinConstraint::None => {}
            }
        }
        Ok(())
    }

    fn table_factor(&mut self, factor: &TableFactor, scope: &[String]) -> Checked {
        match factor {
            TableFactor::Table {
                name,
                alias,
                args,
                with_hints,
                version,
                with_ordinality,
                partitions,
                json_path,
                sample,
                index_hints,
            } => {
                if args.is_some() || *with_ordinality {
                    return refuse(format!(
                        "table functions such as {} are not allowed; read the document's tables",
                        snippet(factor)
                    ));
                }
                if !with_hints.is_empty()
                    || version.is_some()
                    || !partitions.is_empty()
                    || json_path.is_some()
                    || sample.is_some()
                    || !index_hints.is_empty()
                {
                    return Err(unsupported(factor));
                }
                let ident = single(name, "table")?;
                self.table_name(&ident, scope)?;
                if let Some(alias) = alias {
                    self.alias(alias)?;
                }
                Ok(())
            }
            TableFactor::Derived {
                lateral: _,
                subquery,
                alias,
                sample,
            } => {
                if sample.is_some() {
                    return Err(unsupported(factor));
                }
                self.query(subquery, scope)?;
                if let Some(alias) = alias {
                    self.alias(alias)?;
                }
                Ok(())
            }
            TableFactor::NestedJoin {
                table_with_joins,
                alias,
            } => {
                self.table_with_joins(table_with_joins, scope)?;
                if let Some(alias) = alias {
                    self.alias(alias)?;
                }
                Ok(())
            }
            TableFactor::Function { .. }
            | TableFactor::TableFunction { .. }
            | TableFactor::UNNEST { .. }
            | TableFactor::JsonTable { .. }
            | TableFactor::OpenJsonTable { .. }
            | TableFactor::XmlTable { .. } => refuse(format!(
                "table functions such as {} are not allowed; read the document's tables",
                snippet(factor)
            )),
            _ => Err(unsupported(factor)),
        }
    }

    /// A table name must be one of the document's tables or a CTE in scope;
    /// anything else would resolve to a real relation of the database.
    fn table_name(&self, ident: &Ident, scope: &[String]) -> Checked {
        let name = fold(ident)?;
        if scope.contains(&name) {
            return Ok(());
        }
        if self.tables.contains(&name) {
            self.read.borrow_mut().insert(name);
            return Ok(());
        }
        let hint = match self
            .tables
            .iter()
            .find(|t| t.eq_ignore_ascii_case(&ident.value))
        {
            Some(t) => format!(
                " (names are case-sensitive when quoted: write \"{}\")",
                t.replace('"', "\"\"")
            ),
            None => String::new(),
        };
        refuse(format!(
            "unknown table {ident}{hint}: a query may read only the document's own tables and CTEs it defines"
        ))
    }

    fn alias(&self, alias: &TableAlias) -> Checked {
        let TableAlias {
            explicit: _,
            name,
            columns,
            at,
        } = alias;
        fold(name)?;
        if at.is_some() || columns.iter().any(|c| c.data_type.is_some()) {
            return Err(unsupported(alias));
        }
        for column in columns {
            fold(&column.name)?;
        }
        Ok(())
    }

    fn order_by(&mut self, items: &[OrderByExpr], scope: &[String]) -> Checked {
        for item in items {
            let OrderByExpr {
                expr,
                options,
                with_fill,
            } = item;
            if with_fill.is_some() || matches!(options.sort, Some(OrderBySort::Using(_))) {
                return Err(unsupported(item));
            }
            self.expr(expr, scope)?;
        }
        Ok(())
    }

    fn window_spec(&mut self, spec: &WindowSpec, scope: &[String]) -> Checked {
        let WindowSpec {
            window_name: _,
            partition_by,
            order_by,
            window_frame,
        } = spec;
        self.exprs(partition_by, scope)?;
        self.order_by(order_by, scope)?;
        if let Some(WindowFrame {
            units: _,
            start_bound,
            end_bound,
        }) = window_frame
        {
            for bound in std::iter::once(start_bound).chain(end_bound.iter()) {
                if let WindowFrameBound::Preceding(Some(expr))
                | WindowFrameBound::Following(Some(expr)) = bound
                {
                    self.expr(expr, scope)?;
                }
            }
        }
        Ok(())
    }

    fn exprs(&mut self, exprs: &[Expr], scope: &[String]) -> Checked {
        for expr in exprs {
            self.expr(expr, scope)?;
        }
        Ok(())
    }

    fn opt(&mut self, expr: &Option<Box<Expr>>, scope: &[String]) -> Checked {
        match expr {
            Some(expr) => self.expr(expr, scope),
            None => Ok(()),
        }
    }

    fn expr(&mut self, expr: &Expr, scope: &[String]) -> Checked {
        self.enter()?;
        self.expr_inner(expr, scope)?;
        self.leave();
        Ok(())
    }

    fn expr_inner(&mut self, expr: &Expr, scope: &[String]) -> Checked {
        match expr {
            Expr::Identifier(ident) => {
                let name = fold(ident)?;
                if ident.quote_style.is_none() && SESSION_KEYWORDS.contains(&name.as_str()) {
                    return refuse(format!(
                        "{name} names the session's {} in PostgreSQL, not a column; \
                         quote it (\"{name}\") to mean a column",
                        if name == "current_catalog" || name == "current_schema" {
                            "database or schema"
                        } else {
                            "role"
                        }
                    ));
                }
                Ok(())
            }
            Expr::CompoundIdentifier(parts) => {
                if parts.len() > 2 {
                    return refuse(format!(
                        "schema-qualified name {} is not allowed; write table.column at most",
                        snippet(expr)
                    ));
                }
                parts.iter().try_for_each(|p| fold(p).map(|_| ()))
            }
            Expr::CompoundFieldAccess { root, access_chain } => {
                self.expr(root, scope)?;
                for access in access_chain {
                    match access {
                        AccessExpr::Dot(expr) => self.expr(expr, scope)?,
                        AccessExpr::Subscript(Subscript::Index { index }) => {
                            self.expr(index, scope)?
                        }
                        AccessExpr::Subscript(Subscript::Slice {
                            lower_bound,
                            upper_bound,
                            stride,
                        }) => {
                            if stride.is_some() {
                                return Err(unsupported(expr));
                            }
                            for bound in lower_bound.iter().chain(upper_bound.iter()) {
                                self.expr(bound, scope)?;
                            }
                        }
                    }
                }
                Ok(())
            }
            Expr::IsFalse(e)
            | Expr::IsNotFalse(e)
            | Expr::IsTrue(e)
            | Expr::IsNotTrue(e)
            | Expr::IsNull(e)
            | Expr::IsNotNull(e)
            | Expr::IsUnknown(e)
            | Expr::IsNotUnknown(e)
            | Expr::Nested(e)
            | Expr::UnaryOp { expr: e, .. }
            | Expr::Extract { expr: e, .. }
            | Expr::IsNormalized { expr: e, .. } => self.expr(e, scope),
            Expr::IsDistinctFrom(a, b)
            | Expr::IsNotDistinctFrom(a, b)
            | Expr::AtTimeZone {
                timestamp: a,
                time_zone: b,
            }
            | Expr::Position { expr: a, r#in: b }
            | Expr::AnyOp {
                left: a, right: b, ..
            }
            | Expr::AllOp {
                left: a, right: b, ..
            } => {
                self.expr(a, scope)?;
                self.expr(b, scope)
            }
            Expr::BinaryOp { left, op, right } => {
                if matches!(
                    op,
                    sqlparser::ast::BinaryOperator::Custom(_)
                        | sqlparser::ast::BinaryOperator::PGCustomBinaryOperator(_)
                ) {
                    return refuse(format!(
                        "operator {op} is not allowed; use the standard operators"
                    ));
                }
                self.expr(left, scope)?;
                self.expr(right, scope)
            }
            Expr::InList { expr, list, .. } => {
                self.expr(expr, scope)?;
                self.exprs(list, scope)
            }
            Expr::InSubquery { expr, subquery, .. } => {
                self.expr(expr, scope)?;
                self.query(subquery, scope)
            }
            Expr::Between {
                expr, low, high, ..
            } => {
                self.expr(expr, scope)?;
                self.expr(low, scope)?;
                self.expr(high, scope)
            }
            Expr::Like {
                any,
                expr: e,
                pattern,
                escape_char,
                ..
            }
            | Expr::ILike {
                any,
                expr: e,
                pattern,
                escape_char,
                ..
            } => {
                if *any {
                    return Err(unsupported(expr));
                }
                self.expr(e, scope)?;
                self.expr(pattern, scope)?;
                self.opt(escape_char, scope)
            }
            Expr::SimilarTo {
                expr,
                pattern,
                escape_char,
                ..
            } => {
                self.expr(expr, scope)?;
                self.expr(pattern, scope)?;
                self.opt(escape_char, scope)
            }
            Expr::Cast {
                kind,
                expr: e,
                data_type,
                format,
            } => {
                if !matches!(kind, CastKind::Cast | CastKind::DoubleColon) || format.is_some() {
                    return Err(unsupported(expr));
                }
                self.data_type(data_type)?;
                self.expr(e, scope)
            }
            Expr::Ceil { expr: e, field } | Expr::Floor { expr: e, field } => {
                if let CeilFloorKind::Scale(value) = field {
                    self.value(&value.value, expr)?;
                }
                self.expr(e, scope)
            }
            Expr::Substring {
                expr,
                substring_from,
                substring_for,
                ..
            } => {
                self.expr(expr, scope)?;
                self.opt(substring_from, scope)?;
                self.opt(substring_for, scope)
            }
            Expr::Trim {
                expr,
                trim_what,
                trim_characters,
                ..
            } => {
                self.expr(expr, scope)?;
                self.opt(trim_what, scope)?;
                if let Some(chars) = trim_characters {
                    self.exprs(chars, scope)?;
                }
                Ok(())
            }
            Expr::Overlay {
                expr,
                overlay_what,
                overlay_from,
                overlay_for,
            } => {
                self.expr(expr, scope)?;
                self.expr(overlay_what, scope)?;
                self.expr(overlay_from, scope)?;
                self.opt(overlay_for, scope)
            }
            Expr::Collate { expr, collation } => {
                single(collation, "collation")?;
                self.expr(expr, scope)
            }
            Expr::Value(value) => self.value(&value.value, expr),
            Expr::TypedString(typed) => {
                if typed.uses_odbc_syntax {
                    return Err(unsupported(expr));
                }
                self.data_type(&typed.data_type)?;
                self.value(&typed.value.value, expr)
            }
            Expr::Function(function) => self.function(function, scope),
            Expr::Case {
                operand,
                conditions,
                else_result,
                ..
            } => {
                self.opt(operand, scope)?;
                for when in conditions {
                    self.expr(&when.condition, scope)?;
                    self.expr(&when.result, scope)?;
                }
                self.opt(else_result, scope)
            }
            Expr::Exists { subquery, .. } | Expr::Subquery(subquery) => self.query(subquery, scope),
            Expr::GroupingSets(sets) | Expr::Cube(sets) | Expr::Rollup(sets) => {
                for set in sets {
                    self.exprs(set, scope)?;
                }
                Ok(())
            }
            Expr::Tuple(items) => self.exprs(items, scope),
            Expr::Array(array) => self.exprs(&array.elem, scope),
            Expr::Interval(interval) => self.expr(&interval.value, scope),
            Expr::Wildcard(_) => Ok(()),
            Expr::QualifiedWildcard(name, _) => single(name, "name").map(|_| ()),
            _ => Err(unsupported(expr)),
        }
    }

    fn value(&self, value: &Value, within: &Expr) -> Checked {
        match value {
            Value::Number(_, false)
            | Value::SingleQuotedString(_)
            | Value::EscapedStringLiteral(_)
            | Value::DollarQuotedString(_)
            | Value::Boolean(_)
            | Value::Null => Ok(()),
            Value::Placeholder(p) => refuse(format!(
                "parameters such as {p} are not supported; write the values into the query"
            )),
            _ => Err(unsupported(within)),
        }
    }

    fn data_type(&self, data_type: &DataType) -> Checked {
        let shown = data_type.to_string().to_ascii_lowercase();
        // Drop lengths and precisions ("numeric(10,2)") and array brackets.
        let mut base = String::with_capacity(shown.len());
        let mut depth = 0usize;
        for c in shown.chars() {
            match c {
                '(' => depth += 1,
                ')' => depth = depth.saturating_sub(1),
                '[' | ']' => {}
                _ if depth == 0 => base.push(c),
                _ => {}
            }
        }
        let base = base.split_whitespace().collect::<Vec<_>>().join(" ");
        if ALLOWED_TYPES.contains(&base.as_str()) {
            Ok(())
        } else {
            refuse(format!(
                "casting to {shown} is not allowed; cast to a plain type such as \
                 integer, bigint, numeric, double precision, text, boolean, date, timestamp or interval"
            ))
        }
    }

    fn function(&mut self, function: &Function, scope: &[String]) -> Checked {
        let Function {
            name,
            uses_odbc_syntax,
            parameters,
            args,
            filter,
            null_treatment,
            over,
            within_group,
        } = function;
        let ident = match name.0.as_slice() {
            [ObjectNamePart::Identifier(ident)] => ident,
            _ => {
                return refuse(format!(
                    "function {name} is not allowed: functions are called by their plain built-in name"
                ));
            }
        };
        let folded = fold(ident)?;
        if !ALLOWED_FUNCTIONS.contains(&folded.as_str()) {
            return refuse(format!(
                "function {folded} is not allowed: query_documents calls only built-in aggregate, \
                 window, math, string, date, conditional, array and JSON functions \
                 (for example count, sum, avg, round, lower, date_trunc, coalesce)"
            ));
        }
        if *uses_odbc_syntax
            || !matches!(parameters, FunctionArguments::None)
            || null_treatment.is_some()
        {
            return Err(unsupported(function));
        }
        match args {
            FunctionArguments::None => {}
            FunctionArguments::Subquery(query) => self.query(query, scope)?,
            FunctionArguments::List(FunctionArgumentList {
                duplicate_treatment: _,
                args,
                clauses,
            }) => {
                for arg in args {
                    let arg = match arg {
                        FunctionArg::Unnamed(arg) => arg,
                        FunctionArg::Named { arg, .. } => arg,
                        FunctionArg::ExprNamed { .. } => return Err(unsupported(function)),
                    };
                    match arg {
                        FunctionArgExpr::Expr(expr) => self.expr(expr, scope)?,
                        FunctionArgExpr::Wildcard => {}
                        FunctionArgExpr::QualifiedWildcard(name) => {
                            single(name, "name")?;
                        }
                        FunctionArgExpr::WildcardWithOptions(_) => {
                            return Err(unsupported(function));
                        }
                    }
                }
                for clause in clauses {
                    match clause {
                        FunctionArgumentClause::OrderBy(items) => self.order_by(items, scope)?,
                        _ => return Err(unsupported(function)),
                    }
                }
            }
        }
        if let Some(filter) = filter {
            self.expr(filter, scope)?;
        }
        self.order_by(within_group, scope)?;
        match over {
            Some(WindowType::WindowSpec(spec)) => self.window_spec(spec, scope),
            Some(WindowType::NamedWindow(_)) | None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tables() -> Vec<String> {
        vec!["cities".to_string(), "Mixed Case".to_string()]
    }

    /// `Ok(canonical)` or the refusal's message.
    fn run(sql: &str) -> Result<String, String> {
        check(sql, &tables()).map_err(|r| r.0)
    }

    #[test]
    fn accepts_plain_selects_and_prints_them_back() {
        let check = |sql: &str, canonical: &str| {
            assert_eq!(run(sql).as_deref(), Ok(canonical), "sql {sql:?}");
        };
        check("select count(*) from cities", "SELECT count(*) FROM cities");
        check(
            "SELECT city FROM cities -- a comment\nWHERE population > 1e6;",
            "SELECT city FROM cities WHERE population > 1e6",
        );
        check(
            "SELECT 'it''s', E'a\\nb', $$x$$ FROM \"Mixed Case\"",
            "SELECT 'it''s', E'a\\nb', $$x$$ FROM \"Mixed Case\"",
        );
        check(
            "with big as (select * from cities where population > 2000000) select count(*) from big",
            "WITH big AS (SELECT * FROM cities WHERE population > 2000000) SELECT count(*) FROM big",
        );
        check(
            "SELECT country, string_agg(city, ', ' ORDER BY city) FROM cities GROUP BY country HAVING count(*) > 1",
            "SELECT country, string_agg(city, ', ' ORDER BY city) FROM cities GROUP BY country HAVING count(*) > 1",
        );
        check(
            "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY population) FROM cities",
            "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY population) FROM cities",
        );
        check(
            "SELECT count(*) FILTER (WHERE founded < 0), rank() OVER (PARTITION BY country ORDER BY population DESC) FROM cities",
            "SELECT count(*) FILTER (WHERE founded < 0), rank() OVER (PARTITION BY country ORDER BY population DESC) FROM cities",
        );
        check(
            "SELECT population::numeric / 1000, CAST(founded AS text), date_trunc('month', DATE '2024-02-03') FROM cities",
            "SELECT population::NUMERIC / 1000, CAST(founded AS TEXT), date_trunc('month', DATE '2024-02-03') FROM cities",
        );
        check(
            "SELECT \"user\", array_length(ARRAY(SELECT city FROM cities), 1) FROM cities",
            "SELECT \"user\", array_length(ARRAY(SELECT city FROM cities), 1) FROM cities",
        );
        check(
            "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 5) SELECT sum(n) FROM r",
            "WITH RECURSIVE r (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 5) SELECT sum(n) FROM r",
        );
    }

    #[test]
    fn refuses_what_reaches_outside_the_documents_tables() {
        let check = |sql: &str, expected: &str| match run(sql) {
            Ok(canonical) => panic!("{sql:?} was accepted as {canonical:?}"),
            Err(message) => assert!(
                message.contains(expected),
                "{sql:?}: message {message:?} does not contain {expected:?}"
            ),
        };
        check("INSERT INTO cities VALUES (1)", "not INSERT");
        check("DELETE FROM cities", "not DELETE");
        check("DROP TABLE documents", "not DROP");
        check("SET ROLE data_plane_app", "not SET");
        check("SELECT 1; SELECT 2", "2 statements");
        check(
            "WITH gone AS (DELETE FROM cities RETURNING *) SELECT * FROM gone",
            "DELETE changes data",
        );
        check("SELECT * FROM cities FOR UPDATE", "FOR UPDATE");
        check("SELECT * INTO stolen FROM cities", "SELECT INTO");
        check("SELECT pg_sleep(1)", "function pg_sleep is not allowed");
        check("SELECT PG_SLEEP(1)", "function pg_sleep is not allowed");
        check("SELECT \"pg_sleep\"(1)", "function pg_sleep is not allowed");
        check("SELECT pg_catalog.lower('A')", "function pg_catalog.lower");
        check(
            "SELECT set_config('data_plane.system', 'on', true)",
            "set_config",
        );
        check("SELECT * FROM documents", "unknown table documents");
        check("SELECT * FROM Cities2", "unknown table Cities2");
        check("SELECT * FROM mixed_case", "unknown table");
        check("SELECT * FROM \"Cities\"", "unknown table");
        check("SELECT * FROM public.cities", "schema-qualified table");
        check("SELECT * FROM generate_series(1, 3)", "table functions");
        check(
            "SELECT * FROM cities, LATERAL unnest(ARRAY[1])",
            "table functions",
        );
        check(
            "WITH a AS (SELECT * FROM b), b AS (SELECT 1) SELECT * FROM a",
            "unknown table b",
        );
        check(
            "SELECT (SELECT count(*) FROM memberships) FROM cities",
            "unknown table memberships",
        );
        check("SELECT 'documents'::regclass", "casting to regclass");
        check("SELECT $1", "parameters");
        check(
            "SELECT current_schema",
            "current_schema names the session's",
        );
        check(
            "SELECT city FROM cities WHERE city = current_role",
            "current_role names the session's role",
        );
        check("SELECT U&'d\\0061t'", "not supported");
        check("SELECT 1 OPERATOR(pg_catalog.+) 1", "operator");
    }

    #[test]
    fn refuses_deep_nesting_without_overflowing_the_stack() {
        let chain = format!("SELECT {}1 FROM cities", "1+".repeat(4_000));
        let message = run(&chain).unwrap_err();
        assert!(message.contains("nests too deeply"), "{message}");

        let parens = format!("SELECT {}1{} FROM cities", "(".repeat(200), ")".repeat(200));
        let message = run(&parens).unwrap_err();
        assert!(message.contains("does not parse"), "{message}");
    }
}
