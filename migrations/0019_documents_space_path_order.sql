-- grep_documents reads a space's documents in path order and stops as soon
-- as a page of matching lines is full. With (space_id, path, id) indexed, the
-- first documents of that order are an index range scan; with the space id
-- alone every call read and sorted the whole space before the first row.
-- documents_space stays: it leads with the same column, and lookups by space
-- (cascading deletes, counts) keep the narrower index.
CREATE INDEX documents_space_path ON documents (space_id, path, id);
