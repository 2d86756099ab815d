-- mibyan-jupyter team store (PostgreSQL), schema 7: search_messages planned per query
-- (docs/architecture.md, "The team store (PostgreSQL)"). Append-only: never edit a
-- released migration.
--
-- 0006's search_messages is a SQL function, planned once without knowing its query: for a
-- word in nearly every message it joined sessions and called instructs() per match, one
-- by one (~450 ms over 100,000 messages). As plpgsql with EXECUTE ... USING, each call is
-- planned for its actual tsquery (the same rows; a common word ~35 ms, a rare one ~1 ms).
-- Same signature, security and grants.

CREATE OR REPLACE FUNCTION search_messages(query tsquery, max_rows integer, only_session text DEFAULT NULL)
    RETURNS TABLE (id bigint, session_id text, seq integer, rank real)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, mibyan, pg_temp
AS $f$
BEGIN
    RETURN QUERY EXECUTE $q$
    SELECT m.id, m.session_id, m.seq, ts_rank(m.tsv, $1) AS rank
    FROM mibyan.messages m JOIN mibyan.sessions s ON s.id = m.session_id
    WHERE m.tsv @@ $1
      AND ($3 IS NULL OR m.session_id = $3)
      AND (s.user_name = session_user OR mibyan.instructs(session_user, s.user_name))
    ORDER BY rank DESC, m.id
    LIMIT $2 $q$ USING query, max_rows, only_session;
END
$f$;
REVOKE ALL ON FUNCTION search_messages(tsquery, integer, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION search_messages(tsquery, integer, text) TO mibyan_app;

-- The sessions policies, ownership first: an instructor's review policy was checked
-- before the user's own, so instructs() ran for every row, even one's own (a get of one
-- session among 2,000: ~17 ms on a fresh database, ~1.8 ms with this). The same rows.
ALTER POLICY review ON sessions USING (user_name = current_user OR instructs(current_user, user_name));
