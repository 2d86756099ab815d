-- mibyan-jupyter team store (PostgreSQL), schema 2: the SQLite 0002_lease.sql ported
-- (docs/architecture.md, "Store"). Append-only: never edit a released migration.
ALTER TABLE sessions ADD COLUMN lease_token text;
ALTER TABLE sessions ADD COLUMN lease_pid integer;
ALTER TABLE sessions ADD COLUMN lease_host text;
ALTER TABLE sessions ADD COLUMN lease_heartbeat_at double precision;
