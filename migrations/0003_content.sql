-- Sources, folders, documents, chunks with embeddings, and tabular data.
CREATE TYPE source_kind AS ENUM ('files', 'upload', 'feed', 'web');

CREATE TABLE sources (
    id         uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    space_id   uuid NOT NULL REFERENCES spaces (id) ON DELETE CASCADE,
    name       text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    kind       source_kind NOT NULL DEFAULT 'files',
    -- feed URL, polling interval and the like; free-form per kind
    config     jsonb NOT NULL DEFAULT '{}',
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (space_id, name)
);

-- One tree per source. The root folder has path '' and no parent; every other
-- path is the parent's path plus '/' and the name, without a leading slash.
CREATE TABLE folders (
    id         uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    space_id   uuid NOT NULL REFERENCES spaces (id) ON DELETE CASCADE,
    source_id  uuid NOT NULL REFERENCES sources (id) ON DELETE CASCADE,
    parent_id  uuid REFERENCES folders (id) ON DELETE CASCADE,
    name       text NOT NULL,
    path       text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (source_id, path),
    CHECK ((parent_id IS NULL) = (path = ''))
);
CREATE INDEX folders_parent ON folders (parent_id);

CREATE TABLE documents (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    space_id     uuid NOT NULL REFERENCES spaces (id) ON DELETE CASCADE,
    source_id    uuid NOT NULL REFERENCES sources (id) ON DELETE CASCADE,
    folder_id    uuid NOT NULL REFERENCES folders (id) ON DELETE CASCADE,
    -- path inside the source, e.g. 'manual/tutorial/tutorial-start.html'
    path         text NOT NULL,
    name         text NOT NULL,
    mime         text NOT NULL,
    size_bytes   bigint NOT NULL CHECK (size_bytes >= 0),
    -- sha256 of the file's bytes, hex; an unchanged file is not ingested twice
    content_hash text NOT NULL,
    title        text,
    language     text,
    content      text NOT NULL,
    metadata     jsonb NOT NULL DEFAULT '{}',
    version      integer NOT NULL DEFAULT 1,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (source_id, path)
);
CREATE INDEX documents_space ON documents (space_id);
CREATE INDEX documents_folder ON documents (folder_id);
CREATE INDEX documents_name_trgm ON documents USING gin (lower(name) gin_trgm_ops);

CREATE TABLE chunks (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    document_id uuid NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
    space_id    uuid NOT NULL REFERENCES spaces (id) ON DELETE CASCADE,
    ordinal     integer NOT NULL,
    -- char offsets (Unicode code points, end exclusive) into documents.content:
    -- substr(content, char_start + 1, char_end - char_start) = text
    char_start  integer NOT NULL CHECK (char_start >= 0),
    char_end    integer NOT NULL CHECK (char_end > char_start),
    heading     text NOT NULL DEFAULT '',
    page        integer,
    text        text NOT NULL,
    embedding   vector(384) NOT NULL,
    UNIQUE (document_id, ordinal)
);
CREATE INDEX chunks_space ON chunks (space_id);
CREATE INDEX chunks_embedding ON chunks USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64);

-- A table extracted from a CSV, spreadsheet or JSON document.
CREATE TABLE doc_tables (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    document_id uuid NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
    space_id    uuid NOT NULL REFERENCES spaces (id) ON DELETE CASCADE,
    name        text NOT NULL,
    -- [{"name": "...", "kind": "integer|number|boolean|date|text"}]
    columns     jsonb NOT NULL,
    row_count   integer NOT NULL CHECK (row_count >= 0),
    UNIQUE (document_id, name)
);
CREATE INDEX doc_tables_space ON doc_tables (space_id);

CREATE TABLE table_rows (
    table_id   uuid NOT NULL REFERENCES doc_tables (id) ON DELETE CASCADE,
    space_id   uuid NOT NULL REFERENCES spaces (id) ON DELETE CASCADE,
    row_number integer NOT NULL,
    data       jsonb NOT NULL,
    PRIMARY KEY (table_id, row_number)
);
CREATE INDEX table_rows_space ON table_rows (space_id);
