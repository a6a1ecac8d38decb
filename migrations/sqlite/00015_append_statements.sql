-- +goose Up
-- Fewer statements and b-trees per append (docs/performance.md, "SQLite
-- statements per gateway request"). The history index's head moves with
-- the insert of the new head (a trigger), not by a statement of its own
-- before it; and the two tables every append inserts into, the history
-- index and the view's entries, are keyed by their primary key alone
-- (WITHOUT ROWID): a rowid table keeps its primary key as a second b-tree,
-- one more page written to the WAL per table per commit.
CREATE TABLE history_index_key (
    tenant     TEXT    NOT NULL,
    session_id TEXT    NOT NULL,
    length     INTEGER NOT NULL,
    chain      TEXT    NOT NULL,
    head       INTEGER NOT NULL,
    PRIMARY KEY (tenant, session_id, length),
    FOREIGN KEY (tenant, session_id) REFERENCES sessions (tenant, id) ON DELETE CASCADE
) WITHOUT ROWID;
INSERT INTO history_index_key (tenant, session_id, length, chain, head)
SELECT tenant, session_id, length, chain, head FROM history_index;
DROP TABLE history_index;
ALTER TABLE history_index_key RENAME TO history_index;
CREATE INDEX history_index_chain ON history_index (tenant, chain, head);
CREATE INDEX history_index_head ON history_index (tenant, session_id) WHERE head = 1;

-- A new head (an append's last entry) takes the mark from the old one,
-- before it is inserted (or, on a conflict, updated in place). The old head
-- is found by the partial index, named: on a WITHOUT ROWID table the
-- planner prefers the primary key's prefix (tenant, session_id), which
-- reads every entry of the session (a trigger's UPDATE may not name an
-- index itself, its subquery may).
-- +goose StatementBegin
CREATE TRIGGER history_head_moved BEFORE INSERT ON history_index WHEN NEW.head = 1 BEGIN
    UPDATE history_index SET head = 0 WHERE tenant = NEW.tenant AND session_id = NEW.session_id AND length IN
        (SELECT h.length FROM history_index h INDEXED BY history_index_head
         WHERE h.tenant = NEW.tenant AND h.session_id = NEW.session_id AND h.head = 1);
END;
-- +goose StatementEnd

CREATE TABLE view_entries_key (
    tenant     TEXT    NOT NULL,
    session_id TEXT    NOT NULL,
    gen        INTEGER NOT NULL DEFAULT 0,
    ord        INTEGER NOT NULL,
    message_id TEXT    NOT NULL,
    PRIMARY KEY (tenant, session_id, gen, ord),
    FOREIGN KEY (tenant, session_id, message_id) REFERENCES messages (tenant, session_id, id) ON DELETE CASCADE
) WITHOUT ROWID;
INSERT INTO view_entries_key (tenant, session_id, gen, ord, message_id)
SELECT tenant, session_id, gen, ord, message_id FROM view_entries;
DROP TABLE view_entries;
ALTER TABLE view_entries_key RENAME TO view_entries;

-- +goose Down
CREATE TABLE view_entries_rowid (
    tenant     TEXT    NOT NULL,
    session_id TEXT    NOT NULL,
    gen        INTEGER NOT NULL DEFAULT 0,
    ord        INTEGER NOT NULL,
    message_id TEXT    NOT NULL,
    PRIMARY KEY (tenant, session_id, gen, ord),
    FOREIGN KEY (tenant, session_id, message_id) REFERENCES messages (tenant, session_id, id) ON DELETE CASCADE
);
INSERT INTO view_entries_rowid (tenant, session_id, gen, ord, message_id)
SELECT tenant, session_id, gen, ord, message_id FROM view_entries;
DROP TABLE view_entries;
ALTER TABLE view_entries_rowid RENAME TO view_entries;

DROP TRIGGER history_head_moved;
CREATE TABLE history_index_rowid (
    tenant     TEXT    NOT NULL,
    session_id TEXT    NOT NULL,
    length     INTEGER NOT NULL,
    chain      TEXT    NOT NULL,
    head       INTEGER NOT NULL,
    PRIMARY KEY (tenant, session_id, length),
    FOREIGN KEY (tenant, session_id) REFERENCES sessions (tenant, id) ON DELETE CASCADE
);
INSERT INTO history_index_rowid (tenant, session_id, length, chain, head)
SELECT tenant, session_id, length, chain, head FROM history_index;
DROP TABLE history_index;
ALTER TABLE history_index_rowid RENAME TO history_index;
CREATE INDEX history_index_chain ON history_index (tenant, chain, head);
CREATE INDEX history_index_head ON history_index (tenant, session_id) WHERE head = 1;
