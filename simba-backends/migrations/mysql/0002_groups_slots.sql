CREATE TABLE IF NOT EXISTS simba_members (
    name VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    session BINARY(16) NOT NULL,
    PRIMARY KEY (name, session),
    KEY simba_members_session (session)
) ENGINE=InnoDB;
CREATE TABLE IF NOT EXISTS simba_slots (
    name VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY,
    slot BIGINT NOT NULL
) ENGINE=InnoDB;
