-- mibyan-jupyter session store, schema 1.
-- Append-only: never edit a released migration; add NNNN_*.sql instead.

CREATE TABLE sessions (
    id            TEXT PRIMARY KEY,
    parent_id     TEXT REFERENCES sessions(id) ON DELETE SET NULL,
    link_kind     TEXT CHECK (link_kind IN ('fork', 'compression')),
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
    end_reason    TEXT
) STRICT;
CREATE INDEX sessions_by_updated ON sessions(updated_at);
CREATE INDEX sessions_by_notebook ON sessions(notebook_path, updated_at);
CREATE INDEX sessions_by_parent ON sessions(parent_id);

CREATE TABLE messages (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id   TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    seq          INTEGER NOT NULL,
    role         TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
    text         TEXT NOT NULL DEFAULT '',
    data         TEXT NOT NULL,
    tool_calls   TEXT,
    tool_call_id TEXT,
    tool_name    TEXT,
    stop_reason  TEXT,
    usage        TEXT,
    model        TEXT,
    aborted      INTEGER NOT NULL DEFAULT 0,
    created_at   REAL NOT NULL,
    UNIQUE (session_id, seq)
) STRICT;

CREATE TABLE tool_calls (
    session_id   TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    call_id      TEXT NOT NULL,
    name         TEXT NOT NULL,
    arguments    TEXT NOT NULL DEFAULT '',
    status       TEXT NOT NULL DEFAULT 'running'
                 CHECK (status IN ('running', 'awaiting_approval', 'done', 'error', 'cancelled')),
    decision     TEXT CHECK (decision IN ('approved', 'denied')),
    scope        TEXT CHECK (scope IN ('once', 'session', 'always')),
    decided_by   TEXT,
    reason       TEXT,
    requested_at REAL,
    decided_at   REAL,
    started_at   REAL NOT NULL,
    finished_at  REAL,
    PRIMARY KEY (session_id, call_id)
) STRICT;

CREATE TABLE approval_rules (
    tool       TEXT PRIMARY KEY,
    approved   INTEGER NOT NULL,
    created_at REAL NOT NULL
) STRICT;

CREATE TABLE usage_ledger (
    id            INTEGER PRIMARY KEY,
    session_id    TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    message_seq   INTEGER,
    model         TEXT,
    provider      TEXT,
    api           TEXT,
    input_tokens  INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    cache_read    INTEGER NOT NULL DEFAULT 0,
    cache_write   INTEGER NOT NULL DEFAULT 0,
    reasoning     INTEGER NOT NULL DEFAULT 0,
    cost          REAL,
    latency_ms    REAL,
    retries       INTEGER NOT NULL DEFAULT 0,
    fallback_from TEXT,
    created_at    REAL NOT NULL
) STRICT;
CREATE INDEX usage_by_session ON usage_ledger(session_id);

-- Full-text index over messages.text. Rows are indexed in batches (search catches up
-- first, the writer at the end of each run), not by a trigger on every append: indexing
-- one message per transaction doubled the cost of making a message durable. Ids never
-- repeat (AUTOINCREMENT), so fts_state.indexed_upto marks exactly what is indexed, and
-- deletes/updates touch the index only for rows it holds.
CREATE VIRTUAL TABLE messages_fts USING fts5(
    text, content='messages', content_rowid='id', tokenize='unicode61 remove_diacritics 2'
);
CREATE TABLE fts_state (
    id           INTEGER PRIMARY KEY CHECK (id = 1),
    indexed_upto INTEGER NOT NULL
) STRICT;
INSERT INTO fts_state (id, indexed_upto) VALUES (1, 0);
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages
WHEN old.id <= (SELECT indexed_upto FROM fts_state WHERE id = 1) BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, text) VALUES ('delete', old.id, old.text);
END;
CREATE TRIGGER messages_fts_update AFTER UPDATE OF text ON messages
WHEN old.id <= (SELECT indexed_upto FROM fts_state WHERE id = 1) BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, text) VALUES ('delete', old.id, old.text);
    INSERT INTO messages_fts(rowid, text) VALUES (new.id, new.text);
END;
