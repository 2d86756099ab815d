-- mibyan-jupyter session store, schema 4: who wrote a saved approval rule
-- (docs/architecture.md, "Approvals the agent cannot grant itself").
-- Append-only: never edit a released migration; add NNNN_*.sql instead.
--
-- origin: 'approval' (an "always" answer on the approval card) or 'cell' (%agent policy in
-- a cell the user ran). mac: an HMAC-SHA256 of the row under the user's rule key, a file
-- outside this database (store/approval_rules.py). A row whose mac does not verify (written
-- by anything else: code that opened the file with sqlite3, a database copied from another
-- user, a row from before schema 4) is ignored, and flagged_at records when a kernel first
-- found it so.
ALTER TABLE approval_rules ADD COLUMN origin TEXT;
ALTER TABLE approval_rules ADD COLUMN mac TEXT;
ALTER TABLE approval_rules ADD COLUMN flagged_at REAL;
