-- How many times the handler of a call ran: a call the agent retried once
-- (a transient failure of an idempotent tool) is one call with one id and
-- one row, with attempts = 2. Rows written before this count one.
ALTER TABLE tool_calls
    ADD COLUMN attempts smallint NOT NULL DEFAULT 1
        CONSTRAINT tool_calls_attempts_positive CHECK (attempts >= 1);
