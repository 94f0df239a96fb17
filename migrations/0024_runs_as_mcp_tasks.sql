-- A run can be an MCP task: one tool call run on its own, outliving the
-- request that started it, polled and cancelled from any replica
-- (docs/mcp.md, "Tasks"). Its row names the tool; a chat turn's row leaves
-- it NULL.
ALTER TABLE runs ADD COLUMN tool text;
