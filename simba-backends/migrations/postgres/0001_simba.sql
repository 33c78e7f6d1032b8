CREATE TABLE IF NOT EXISTS simba_sessions (
    id bytea PRIMARY KEY,
    lease_us bigint NOT NULL,
    expires_us bigint NOT NULL,
    metadata text
);
CREATE TABLE IF NOT EXISTS simba_leases (
    name varchar(128) PRIMARY KEY,
    session bytea,
    token bigint NOT NULL CHECK (token >= 0),
    acquired_us bigint
);
CREATE INDEX IF NOT EXISTS simba_leases_session ON simba_leases (session);
