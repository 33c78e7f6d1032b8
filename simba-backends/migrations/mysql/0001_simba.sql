CREATE TABLE IF NOT EXISTS simba_sessions (
    id BINARY(16) NOT NULL PRIMARY KEY,
    lease_us BIGINT NOT NULL,
    expires_us BIGINT NOT NULL,
    metadata TEXT NULL
) ENGINE=InnoDB;
CREATE TABLE IF NOT EXISTS simba_leases (
    name VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY,
    session BINARY(16) NULL,
    token BIGINT NOT NULL,
    acquired_us BIGINT NULL,
    KEY simba_leases_session (session)
) ENGINE=InnoDB;
