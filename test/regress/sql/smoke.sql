--
-- smoke: the basics a pooler in front of Postgres must pass through unchanged:
-- DDL, DML with RETURNING, types, NULLs, ordering, aggregates, joins, errors,
-- notices, session settings and prepared statements.
--
CREATE TABLE smoke_items (
    id      int PRIMARY KEY,
    name    text NOT NULL,
    price   numeric(10,2),
    tags    text[],
    added   date DEFAULT '2024-01-15'
);
INSERT INTO smoke_items (id, name, price, tags) VALUES
    (1, 'apple', 1.20, '{fruit,red}'),
    (2, 'bread', 3.50, '{bakery}'),
    (3, 'cheese', 12.00, NULL),
    (4, 'dates', NULL, '{fruit}')
RETURNING id, name;
SELECT * FROM smoke_items ORDER BY id;
SELECT count(*), sum(price), avg(price)::numeric(10,3), max(name) FROM smoke_items;
SELECT name FROM smoke_items WHERE 'fruit' = ANY (tags) ORDER BY name;
SELECT name, coalesce(price, 0) AS price FROM smoke_items WHERE price IS NULL OR price > 3 ORDER BY 2 DESC;
UPDATE smoke_items SET price = price * 2 WHERE id IN (1, 2) RETURNING id, price;
DELETE FROM smoke_items WHERE id = 4 RETURNING *;
-- a join and a CTE
CREATE TABLE smoke_orders (order_id int, item_id int REFERENCES smoke_items (id), qty int);
INSERT INTO smoke_orders VALUES (10, 1, 3), (11, 2, 1), (12, 1, 5);
WITH totals AS (
    SELECT item_id, sum(qty) AS qty FROM smoke_orders GROUP BY item_id
)
SELECT i.name, t.qty, i.price * t.qty AS total
FROM totals t JOIN smoke_items i ON i.id = t.item_id
ORDER BY i.name;
-- errors come back as errors, and the session goes on
SELECT 1 / 0;
INSERT INTO smoke_items (id, name) VALUES (1, 'duplicate');
INSERT INTO smoke_orders VALUES (13, 99, 1);
SELECT no_such_column FROM smoke_items;
SELECT 'still here' AS status;
-- notices
DO $$ BEGIN RAISE NOTICE 'hello from plpgsql %', 42; END $$;
-- session settings and parameter status
SET application_name = 'neki_smoke';
SHOW application_name;
SET search_path = pg_catalog, public;
SHOW search_path;
RESET search_path;
SELECT 'a' || NULL IS NULL AS concat_null, E'tab\there' AS escaped, 'ünïcödé' AS utf8;
SELECT 12345678901234::bigint, 1.5::float8, 'NaN'::numeric, interval '1 day 2 hours',
       '2024-02-29'::date + 1 AS next_day, '{"a": [1, 2]}'::jsonb -> 'a' AS json_path;
-- prepared statements (session level)
PREPARE smoke_by_id (int) AS SELECT name FROM smoke_items WHERE id = $1;
EXECUTE smoke_by_id(2);
EXECUTE smoke_by_id(3);
DEALLOCATE smoke_by_id;
-- large messages both ways: a 300 kB value comes back and is sent again
SELECT repeat('x', 300000) || 'end' AS big \gset
SELECT length(:'big') AS len, right(:'big', 4) AS tail;
SELECT count(*), min(g), max(g), sum(g) FROM generate_series(1, 100000) g;
SELECT string_agg(g::text, ',') FROM generate_series(1, 20) g;
DROP TABLE smoke_orders;
DROP TABLE smoke_items;
