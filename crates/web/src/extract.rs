//! Readable extraction: the main content of an HTML page as Markdown, and its metadata.
