-- mibyan-jupyter session store, schema 6: whose a session is, and the audit trail
-- (docs/architecture.md, "Admin policy"). Append-only: never edit a released migration.
--
-- sessions.user_name: the user a session belongs to (JUPYTERHUB_USER, else the OS user),
-- set when it is created. NULL: a session written before schema 6, which belongs to the
-- owner of the database file (listings show it to that OS user only).
--
-- audit: one row per approval decision, policy denial, cap hit, exam-mode refusal and
-- admin-policy change, with the user and the time. session_id has no foreign key on
-- purpose: a refusal can come before any session exists, and deleting a session must not
-- delete what was recorded about it (retention purges audit rows by their own time). On
-- SQLite the trail is best effort: the file is the user's own; the trigger only stops an
-- honest mistake. On PostgreSQL students get INSERT and SELECT only.
ALTER TABLE sessions ADD COLUMN user_name TEXT;
CREATE INDEX sessions_by_user ON sessions(user_name, updated_at);
CREATE TABLE audit (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    at         REAL NOT NULL,
    user_name  TEXT NOT NULL,
    session_id TEXT,
    kind       TEXT NOT NULL
               CHECK (kind IN ('approval', 'policy_denial', 'cap_hit', 'exam_refusal', 'policy_change')),
    detail     TEXT NOT NULL DEFAULT '{}'
) STRICT;
CREATE INDEX audit_by_user ON audit(user_name, at);
CREATE INDEX audit_by_session ON audit(session_id);
CREATE TRIGGER audit_append_only BEFORE UPDATE ON audit
BEGIN
    SELECT RAISE(ABORT, 'audit rows are append-only');
END;
