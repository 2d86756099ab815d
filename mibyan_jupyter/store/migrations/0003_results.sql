-- mibyan-jupyter session store, schema 3: big tool results kept in full (docs/architecture.md, "Store").
-- Append-only: never edit a released migration; add NNNN_*.sql instead.
--
-- A tool result over the spill limit reaches the transcript as a preview; its full text
-- lives here, so it follows the session to another machine and into exports, and the
-- read_result tool pages through it. result_id is unique across the file; a session reads
-- the results of its whole lineage (a result kept before a compaction stays readable).
CREATE TABLE tool_results (
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    result_id  TEXT NOT NULL,
    call_id    TEXT NOT NULL,
    tool_name  TEXT NOT NULL,
    content    TEXT NOT NULL,
    chars      INTEGER NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (session_id, result_id)
) STRICT;
CREATE UNIQUE INDEX tool_results_by_id ON tool_results(result_id);
