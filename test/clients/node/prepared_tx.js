// node-postgres (npm `pg`, named queries = server-side prepared statements) through neki in
// transaction mode: N clients x M transactions; prints "errors=<n> rows=<n>".
// Run: NODE_PATH=<dir with pg> node prepared_tx.js <port> <db> <clients> <txns>
const { Client } = require('pg');

async function client(id, port, db, txns, stats) {
	const c = new Client({ host: '127.0.0.1', port, database: db, user: 'postgres' });
	await c.connect();
	try {
		for (let i = 0; i < txns; i++) {
			await c.query('BEGIN');
			await c.query({ name: 'ins', text: 'insert into nt values ($1, $2)',
					values: [id * 100000 + i, i] });
			const r = await c.query({ name: 'sel', text: 'select v from nt where k = $1',
						  values: [id * 100000 + i] });
			if (r.rows.length === 1 && r.rows[0].v === i)
				stats.rows++;
			await c.query('COMMIT');
		}
	} finally {
		await c.end();
	}
}

async function main() {
	const [port, db, clients, txns] = process.argv.slice(2);
	const stats = { rows: 0, errors: 0 };
	const runs = [];
	for (let id = 0; id < Number(clients); id++)
		runs.push(client(id, Number(port), db, Number(txns), stats).catch((e) => {
			stats.errors++;
			console.error(`client ${id}: ${e}`);
		}));
	await Promise.all(runs);
	console.log(`errors=${stats.errors} rows=${stats.rows}`);
}

main();
