DROP PROCEDURE IF EXISTS simba_acquire_lease;
CREATE PROCEDURE simba_acquire_lease(p_session BINARY(16),
    p_name VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin)
MODIFIES SQL DATA SQL SECURITY INVOKER
COMMENT 'Simba''s acquire, version 1'
BEGIN
  -- Simba's acquire, version 1 (S1.2, S3.2; see Simba's docs/BACKENDS.md, "MySQL / MariaDB").
  DECLARE v_own BOOLEAN DEFAULT @@autocommit = 1;
  DECLARE v_mine BIGINT;
  DECLARE v_holder BINARY(16);
  DECLARE v_token BIGINT;
  DECLARE v_theirs BIGINT;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    IF v_own THEN ROLLBACK; END IF;
    RESIGNAL;
  END;
  IF v_own THEN START TRANSACTION; END IF;
  INSERT INTO simba_leases (name, session, token, acquired_us) VALUES (p_name, NULL, 0, NULL)
    ON DUPLICATE KEY UPDATE token = token;
  SELECT me.expires_us - CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS SIGNED), l.session, l.token, h.expires_us - CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS SIGNED)
    INTO v_mine, v_holder, v_token, v_theirs
    FROM simba_leases l LEFT JOIN simba_sessions me ON me.id = p_session LEFT JOIN simba_sessions h ON h.id = l.session
    WHERE l.name = p_name LOCK IN SHARE MODE;
  IF v_mine > 0 AND (v_holder IS NULL OR v_holder <> p_session)
     AND (v_theirs IS NULL OR v_theirs <= 0) AND v_token < 9223372036854775807 THEN
    UPDATE simba_leases SET session = p_session, token = token + 1, acquired_us = CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS SIGNED)
      WHERE name = p_name;
    SET v_holder = p_session, v_token = v_token + 1, v_theirs = v_mine;
    IF v_own THEN COMMIT; END IF;
  ELSEIF v_own THEN
    ROLLBACK;
  END IF;
  SELECT v_holder, v_token, v_mine, v_theirs;
END;
