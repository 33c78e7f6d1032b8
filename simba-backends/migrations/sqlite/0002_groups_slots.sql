CREATE TABLE IF NOT EXISTS simba_members (
    name TEXT NOT NULL,
    session BLOB NOT NULL,
    PRIMARY KEY (name, session)
);
CREATE INDEX IF NOT EXISTS simba_members_session ON simba_members (session);
CREATE TABLE IF NOT EXISTS simba_slots (
    name TEXT PRIMARY KEY NOT NULL,
    slot INTEGER NOT NULL
);
