-- mibyan-jupyter team store (PostgreSQL), schema 4: the SQLite 0004_rule_origin.sql ported
-- (docs/architecture.md, "Approvals the agent cannot grant itself"). Append-only.
ALTER TABLE approval_rules ADD COLUMN origin text;
ALTER TABLE approval_rules ADD COLUMN mac text;
ALTER TABLE approval_rules ADD COLUMN flagged_at double precision;
