// node-postgres (npm `pg`) parameterised queries on a sharded database through neki: every
// statement is routed by its bound value. Named queries send Parse before any Bind and are
// re-bound for the next value; unnamed ones send Parse + Bind each time.
// For each id: INSERT (id, 'node <id>'), SELECT name by id (named), UPDATE name by id
// (unnamed), SELECT again; prints "<id>|<name after insert>|<name after update>|<count>".
// Run: NODE_PATH=<dir with pg> node sharded_route.js <port> <db> <id>...
const { Client } = require('pg');

async function main() {
	const [port, db, ...ids] = process.argv.slice(2);
	const c = new Client({ host: '127.0.0.1', port: Number(port), database: db,
			       user: 'postgres' });
	await c.connect();
	const read = async (id) => {
		const r = await c.query({ name: 'sel', text: 'select name from customers where id = $1',
					  values: [id] });
		return r.rows.map((x) => x.name).join(',');
	};
	try {
		for (const id of ids) {
			await c.query({ name: 'ins', text: "insert into customers (id, name, country) " +
					"values ($1, $2, 'FR')", values: [id, `node ${id}`] });
			const first = await read(id);
			const u = await c.query('update customers set name = $1 where id = $2',
						[`node upd ${id}`, id]);
			console.log(`${id}|${first}|${await read(id)}|${u.rowCount}`);
		}
	} finally {
		await c.end();
	}
}

main().catch((e) => {
	console.error(String(e));
	process.exit(1);
});
