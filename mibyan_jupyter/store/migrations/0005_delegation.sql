-- mibyan-jupyter session store, schema 5: delegated child sessions (docs/architecture.md, "Store").
-- Append-only: never edit a released migration; add NNNN_*.sql instead.
-- mibyan: foreign keys off
--
-- A child agent that a parent's delegate_task started keeps its own transcript in a session
-- of its own, linked to the parent's with link_kind 'delegation'. SQLite cannot alter a
-- CHECK constraint, so the sessions table is rebuilt as SQLite's documentation prescribes
-- ("Making Other Kinds Of Table Schema Changes"): the marker line above makes the store run
-- this file with foreign keys off (a DROP TABLE with them on would delete every message by
-- ON DELETE CASCADE), and check PRAGMA foreign_key_check before it commits. The columns keep
-- their order (0001's, then 0002's lease columns), so every row copies as it is, its rowid
-- too (listings break ties by it); the three indexes are made again. No trigger or view
-- reads sessions, and the full-text index holds messages only: the other tables'
-- REFERENCES sessions(id) name the table, which the rename gives back.
CREATE TABLE sessions_new (
    id            TEXT PRIMARY KEY,
    parent_id     TEXT REFERENCES sessions(id) ON DELETE SET NULL,
    link_kind     TEXT CHECK (link_kind IN ('fork', 'compression', 'delegation')),
    fork_at       INTEGER,
    title         TEXT NOT NULL DEFAULT '',
    model         TEXT,
    api_mode      TEXT,
    notebook_path TEXT,
    status        TEXT NOT NULL DEFAULT 'idle'
                  CHECK (status IN ('idle', 'running', 'awaiting_approval', 'interrupted')),
    owner_pid     INTEGER,
    owner_host    TEXT,
    config        TEXT NOT NULL DEFAULT '{}',
    created_at    REAL NOT NULL,
    updated_at    REAL NOT NULL,
    ended_at      REAL,
    end_reason    TEXT,
    lease_token   TEXT,
    lease_pid     INTEGER,
    lease_host    TEXT,
    lease_heartbeat_at REAL
) STRICT;
INSERT INTO sessions_new (
    rowid, id, parent_id, link_kind, fork_at, title, model, api_mode, notebook_path, status,
    owner_pid, owner_host, config, created_at, updated_at, ended_at, end_reason,
    lease_token, lease_pid, lease_host, lease_heartbeat_at
)
SELECT
    rowid, id, parent_id, link_kind, fork_at, title, model, api_mode, notebook_path, status,
    owner_pid, owner_host, config, created_at, updated_at, ended_at, end_reason,
    lease_token, lease_pid, lease_host, lease_heartbeat_at
FROM sessions ORDER BY rowid;
DROP TABLE sessions;
ALTER TABLE sessions_new RENAME TO sessions;
CREATE INDEX sessions_by_updated ON sessions(updated_at);
CREATE INDEX sessions_by_notebook ON sessions(notebook_path, updated_at);
CREATE INDEX sessions_by_parent ON sessions(parent_id);
