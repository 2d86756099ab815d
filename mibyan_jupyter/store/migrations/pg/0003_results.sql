-- mibyan-jupyter team store (PostgreSQL), schema 3: the SQLite 0003_results.sql ported
-- (docs/architecture.md, "Store"). Append-only: never edit a released migration.
CREATE TABLE tool_results (
    session_id text NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    result_id  text NOT NULL,
    call_id    text NOT NULL,
    tool_name  text NOT NULL,
    content    text NOT NULL,
    chars      integer NOT NULL,
    created_at double precision NOT NULL,
    PRIMARY KEY (session_id, result_id)
);
CREATE UNIQUE INDEX tool_results_by_id ON tool_results(result_id);
