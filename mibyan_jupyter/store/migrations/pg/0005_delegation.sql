-- mibyan-jupyter team store (PostgreSQL), schema 5: the SQLite 0005_delegation.sql ported
-- (delegated child sessions, link_kind 'delegation'). Append-only. PostgreSQL alters a
-- CHECK constraint in place, so nothing is rebuilt.
ALTER TABLE sessions DROP CONSTRAINT sessions_link_kind_check;
ALTER TABLE sessions ADD CONSTRAINT sessions_link_kind_check
    CHECK (link_kind IN ('fork', 'compression', 'delegation'));
