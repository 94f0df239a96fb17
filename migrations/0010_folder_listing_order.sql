-- list_folder_contents pages through one folder in name order. With the name
-- in the index a page is an index range scan that stops after offset + limit
-- entries; with the folder id alone every page of a large folder read and
-- sorted the whole folder. The new indexes lead with the same column as the
-- ones they replace, so lookups and cascading deletes by folder keep theirs.
CREATE INDEX documents_folder_name ON documents (folder_id, name);
CREATE INDEX folders_parent_name ON folders (parent_id, name);
DROP INDEX documents_folder;
DROP INDEX folders_parent;
