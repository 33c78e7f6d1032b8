CREATE OR REPLACE FUNCTION simba_acquire_lease(p_session bytea, p_name text)
RETURNS TABLE (holder bytea, token bigint, mine_us bigint, holder_us bigint)
LANGUAGE plpgsql VOLATILE AS $simba$
#variable_conflict use_column
-- Simba's acquire, version 1 (S1.2, S3.2; see Simba's docs/BACKENDS.md, "PostgreSQL").
BEGIN
  INSERT INTO simba_leases AS l (name, session, token, acquired_us) VALUES (p_name, NULL, 0, NULL)
    ON CONFLICT (name) DO UPDATE SET token = l.token;
  RETURN QUERY
  WITH now AS (SELECT (extract(epoch from clock_timestamp()) * 1000000)::bigint AS t),
  j AS (SELECT (SELECT m.expires_us FROM simba_sessions m WHERE m.id = p_session FOR SHARE OF m) AS mine,
               (SELECT h.expires_us FROM simba_sessions h
                WHERE h.id = (SELECT x.session FROM simba_leases x WHERE x.name = p_name)
                FOR SHARE OF h) AS theirs),
  u AS (UPDATE simba_leases AS l SET session = p_session, token = l.token + 1, acquired_us = now.t
        FROM now, j
        WHERE l.name = p_name AND l.session IS DISTINCT FROM p_session
          AND j.mine > now.t AND (j.theirs IS NULL OR j.theirs <= now.t)
        RETURNING l.session, l.token)
  SELECT coalesce(u.session, l.session), coalesce(u.token, l.token), j.mine - now.t,
    CASE WHEN u.session IS NULL THEN j.theirs ELSE j.mine END - now.t
  FROM simba_leases l LEFT JOIN u ON true, now, j WHERE l.name = p_name;
END
$simba$;
