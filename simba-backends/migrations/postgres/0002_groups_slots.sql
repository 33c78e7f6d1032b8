CREATE TABLE IF NOT EXISTS simba_members (
    name varchar(128) NOT NULL,
    session bytea NOT NULL,
    PRIMARY KEY (name, session)
);
CREATE INDEX IF NOT EXISTS simba_members_session ON simba_members (session);
CREATE TABLE IF NOT EXISTS simba_slots (
    name varchar(128) PRIMARY KEY,
    slot bigint NOT NULL CHECK (slot >= 0)
);
