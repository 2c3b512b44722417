-- The demo's storefront (test/harness/demo runs it through neki on database demo, and on the
-- reference server directly): DDL goes to every shard, rows to the shard their key names.
CREATE TABLE countries (code text PRIMARY KEY, name text NOT NULL);
CREATE TABLE customers (id bigint PRIMARY KEY, name text NOT NULL,
                        country text REFERENCES countries);
CREATE TABLE orders (customer_id bigint NOT NULL, id bigint NOT NULL,
                     status text NOT NULL DEFAULT 'new', total numeric(10,2),
                     PRIMARY KEY (customer_id, id));
CREATE TABLE order_items (customer_id bigint NOT NULL, order_id bigint NOT NULL,
                          line int NOT NULL, sku text NOT NULL, qty int NOT NULL,
                          PRIMARY KEY (customer_id, order_id, line));
CREATE TABLE products (sku text PRIMARY KEY, name text NOT NULL, price numeric(10,2));
-- the lookup table of the GSI orders_by_id (orders by id -> their customer_id): neki writes
-- its rows with each order; the application never names it
CREATE TABLE orders_by_id (id bigint PRIMARY KEY, customer_id bigint NOT NULL);

INSERT INTO countries VALUES ('FR', 'France'), ('DE', 'Germany'), ('JP', 'Japan');
INSERT INTO customers VALUES (1, 'Ada', 'FR'), (2, 'Grace', 'DE'), (3, 'Linus', 'JP'),
  (4, 'Barbara', 'FR'), (5, 'Ken', 'DE'), (6, 'Margaret', 'JP'), (7, 'Dennis', 'FR'),
  (8, 'Frances', 'DE');
INSERT INTO orders VALUES (1, 101, 'paid', 25.00), (1, 102, 'new', 12.50),
  (2, 201, 'paid', 99.90), (3, 301, 'shipped', 5.00), (4, 401, 'paid', 42.00),
  (5, 501, 'new', 7.25), (6, 601, 'paid', 18.00), (7, 701, 'shipped', 3.50),
  (8, 801, 'paid', 64.00);
INSERT INTO order_items VALUES (1, 101, 1, 'KB-01', 1), (1, 101, 2, 'MS-02', 2),
  (2, 201, 1, 'MON-27', 1), (3, 301, 1, 'CBL-05', 5), (4, 401, 1, 'KB-01', 3);
INSERT INTO products VALUES ('KB-01', 'Keyboard', 25.00), ('MS-02', 'Mouse', 12.50),
  ('MON-27', 'Monitor', 99.90), ('CBL-05', 'Cable', 1.00);
