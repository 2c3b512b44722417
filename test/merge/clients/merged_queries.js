// node-postgres (npm `pg`): merged SELECTs with parameters, unnamed and named statements;
// prints every result as JSON lines; the test compares neki's output with the reference's.
// Run: NODE_PATH=<dir with pg> node merged_queries.js <port> <db>
const { Client } = require('pg');

const QUERIES = [
	['SELECT id, n, s FROM t WHERE x > $1 ORDER BY n DESC NULLS LAST, id LIMIT $2 OFFSET $3', [0, 5, 2]],
	['SELECT g, count(*), sum(x), avg(n), min(s), max(d) FROM t WHERE x > $1 GROUP BY g ORDER BY g', [-20]],
	['SELECT g, count(*) FROM t GROUP BY g HAVING count(*) > $1 ORDER BY g', [25]],
	['SELECT DISTINCT g FROM t WHERE x < $1 ORDER BY g DESC', [0]],
	['SELECT id, v FROM big WHERE v > $1 ORDER BY v DESC, id LIMIT $2', [990, 7]],
	['SELECT g, sum(DISTINCT x), stddev(n), string_agg(DISTINCT s, $2 ORDER BY s) FROM t ' +
	 'WHERE x > $1 GROUP BY g HAVING g > 1 ORDER BY g', [-30, ',']],
	['SELECT g, jsonb_agg(x ORDER BY id), array_agg(DISTINCT x ORDER BY x), var_pop(x) FROM t ' +
	 'WHERE x < $1 GROUP BY g ORDER BY g', [0]],
];

async function main() {
	const [port, db] = process.argv.slice(2);
	const c = new Client({ host: '127.0.0.1', port: Number(port), database: db, user: 'postgres' });
	await c.connect();
	try {
		for (const named of [false, true])
			for (let q = 0; q < QUERIES.length; q++) {
				const cfg = { text: QUERIES[q][0], values: QUERIES[q][1] };
				if (named)
					cfg.name = 'q' + q;
				const r = await c.query(cfg);
				console.log(JSON.stringify([q, r.fields.map((f) => [f.name, f.dataTypeID]),
							    r.rows, r.command, r.rowCount]));
			}
	} finally {
		await c.end();
	}
}

main().catch((e) => { console.error(String(e)); process.exit(1); });
