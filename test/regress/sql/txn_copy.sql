--
-- txn_copy: transactions, savepoints, aborted transactions, cursors, COPY in and out.
--
CREATE TABLE txn_accounts (id int PRIMARY KEY, balance int NOT NULL CHECK (balance >= 0));
INSERT INTO txn_accounts SELECT g, 100 FROM generate_series(1, 5) g;
-- a committed transfer
BEGIN;
UPDATE txn_accounts SET balance = balance - 30 WHERE id = 1;
UPDATE txn_accounts SET balance = balance + 30 WHERE id = 2;
COMMIT;
-- a rolled back one
BEGIN;
UPDATE txn_accounts SET balance = 0 WHERE id = 3;
ROLLBACK;
SELECT id, balance FROM txn_accounts ORDER BY id;
-- an error aborts the transaction until ROLLBACK
BEGIN;
UPDATE txn_accounts SET balance = balance - 500 WHERE id = 4;
SELECT 'ignored';
ROLLBACK;
-- savepoints
BEGIN;
UPDATE txn_accounts SET balance = balance + 1 WHERE id = 5;
SAVEPOINT s1;
UPDATE txn_accounts SET balance = -1 WHERE id = 5;
ROLLBACK TO SAVEPOINT s1;
UPDATE txn_accounts SET balance = balance + 1 WHERE id = 5;
RELEASE SAVEPOINT s1;
COMMIT;
SELECT balance FROM txn_accounts WHERE id = 5;
-- transaction state is visible
BEGIN ISOLATION LEVEL REPEATABLE READ;
SHOW transaction_isolation;
COMMIT;
-- cursors
BEGIN;
DECLARE c CURSOR FOR SELECT id FROM txn_accounts ORDER BY id;
FETCH 2 FROM c;
FETCH NEXT FROM c;
MOVE FORWARD 1 IN c;
FETCH ALL FROM c;
CLOSE c;
COMMIT;
-- COPY in (psql sends the data through the connection) and out
CREATE TABLE txn_copy (id int, label text, amount numeric);
COPY txn_copy FROM stdin;
1	first	1.5
2	second	\N
3	third, with comma	-7
\.
COPY txn_copy (id, label) FROM stdin WITH (FORMAT csv, HEADER true);
id,label
4,"quoted ""label"""
5,
\.
SELECT * FROM txn_copy ORDER BY id;
COPY (SELECT id, label FROM txn_copy WHERE id <= 3 ORDER BY id) TO stdout;
COPY (SELECT id, amount FROM txn_copy ORDER BY id) TO stdout WITH (FORMAT csv, HEADER true);
-- a COPY that fails midway leaves no rows behind
COPY txn_copy (id) FROM stdin;
6
not a number
\.
SELECT count(*) FROM txn_copy;
DROP TABLE txn_copy;
DROP TABLE txn_accounts;
