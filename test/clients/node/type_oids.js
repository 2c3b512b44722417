// node-postgres (npm `pg`) reading user-defined types on a sharded database through neki
// (test/routing/test_type_oids.py): for each customer id (one per shard), the dataTypeID of
// the enum and composite columns (the authoritative shard's OIDs whichever shard answers)
// and the enum's value. Prints "<id>|<oid of m>|<oid of a>|<m>" per id.
// Run: NODE_PATH=<dir with pg> node type_oids.js <port> <db> <id>...
const { Client } = require('pg');

async function main() {
	const [port, db, ...ids] = process.argv.slice(2);
	const c = new Client({ host: '127.0.0.1', port: Number(port), database: db,
			       user: 'postgres' });
	await c.connect();
	try {
		for (const id of ids) {
			const r = await c.query('select m, a from customers where id = $1', [id]);
			console.log(`${id}|${r.fields[0].dataTypeID}|${r.fields[1].dataTypeID}|` +
				    `${r.rows[0].m}`);
		}
	} finally {
		await c.end();
	}
}

main().catch((e) => {
	console.error(String(e));
	process.exit(1);
});
