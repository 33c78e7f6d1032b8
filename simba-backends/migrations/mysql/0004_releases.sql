CREATE TABLE IF NOT EXISTS simba_releases (
    seq BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    name VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    token BIGINT NOT NULL,
    session BINARY(16) NOT NULL,
    node BINARY(16) NOT NULL,
    at_us BIGINT NOT NULL,
    KEY simba_releases_at (at_us)
) ENGINE=InnoDB;
