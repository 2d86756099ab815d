-- mibyan-jupyter session store, schema 2: one writer per session (docs/architecture.md, "Store").
-- Append-only: never edit a released migration; add NNNN_*.sql instead.
--
-- The lease of a session: the kernel that writes it. lease_token is new at every
-- acquisition and fences the writes (each write transaction of a store writer checks that
-- the token is still its own); lease_pid / lease_host name the kernel for the user, and
-- lease_heartbeat_at (epoch seconds) is renewed by that kernel's heartbeat thread: its age
-- is what store/liveness.py judges. All NULL: nobody holds the session.
ALTER TABLE sessions ADD COLUMN lease_token TEXT;
ALTER TABLE sessions ADD COLUMN lease_pid INTEGER;
ALTER TABLE sessions ADD COLUMN lease_host TEXT;
ALTER TABLE sessions ADD COLUMN lease_heartbeat_at REAL;
