CREATE TABLE IF NOT EXISTS simba_sessions (
    id BLOB PRIMARY KEY NOT NULL,
    lease_us INTEGER NOT NULL,
    expires_us INTEGER NOT NULL,
    metadata TEXT
);
CREATE TABLE IF NOT EXISTS simba_leases (
    name TEXT PRIMARY KEY NOT NULL,
    session BLOB,
    token INTEGER NOT NULL,
    acquired_us INTEGER
);
CREATE INDEX IF NOT EXISTS simba_leases_session ON simba_leases (session);
