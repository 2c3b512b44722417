// JDBC (pgjdbc) result sets read in parts: with autocommit off and setFetchSize(n) the
// driver binds a named portal and sends Execute with a row limit of n, then Execute again
// for the next n rows. Runs single-shard, scatter (concatenated: the rows are sorted here),
// ORDER BY and aggregate queries with several fetch sizes, and two result sets read in turn
// (two portals open at once); prints every row. The test compares the output through neki
// with the output on the reference server.
// Run: java -cp /usr/share/java/postgresql.jar FetchSize.java <jdbc url>
import java.sql.*;
import java.util.*;

public class FetchSize {
	static final String[] QUERIES = {
		"SELECT id, grp, v, note FROM items WHERE customer_id = ? ORDER BY id",
		"SELECT id, grp FROM items WHERE id % 500 = ?",
		"SELECT id, v, note FROM items WHERE grp < ? ORDER BY v DESC, id LIMIT 700",
		"SELECT grp, count(*), sum(v), min(note), avg(v) FROM items WHERE id > ? "
			+ "GROUP BY grp ORDER BY grp",
		"SELECT * FROM items WHERE id > ? ORDER BY customer_id, id",
	};
	static final int[] PARAMS = { 7, 3, 5, 100, 0 };
	static final boolean[] SORT = { false, true, false, false, false };

	static String row(ResultSet rs) throws SQLException {
		StringBuilder b = new StringBuilder();
		int n = rs.getMetaData().getColumnCount();
		for (int i = 1; i <= n; i++)
			b.append(i > 1 ? "|" : "").append(rs.getString(i));
		return b.toString();
	}

	public static void main(String[] args) throws Exception {
		try (Connection c = DriverManager.getConnection(args[0])) {
			c.setAutoCommit(false);
			for (int fetch : new int[] { 1, 7, 250 })
				for (int q = 0; q < QUERIES.length; q++) {
					List<String> rows = new ArrayList<>();
					try (PreparedStatement ps = c.prepareStatement(QUERIES[q])) {
						ps.setFetchSize(fetch);
						ps.setInt(1, PARAMS[q]);
						try (ResultSet rs = ps.executeQuery()) {
							while (rs.next())
								rows.add(row(rs));
						}
					}
					if (SORT[q])
						Collections.sort(rows);
					System.out.println("Q" + q + " fetch " + fetch + ": " + rows.size());
					for (String r : rows)
						System.out.println(" " + r);
				}
			c.commit();
			// two portals open at once, read in turn
			try (PreparedStatement a = c.prepareStatement(QUERIES[2]);
			     PreparedStatement b = c.prepareStatement(QUERIES[0])) {
				a.setFetchSize(3);
				b.setFetchSize(2);
				a.setInt(1, 3);
				b.setInt(1, 42);
				try (ResultSet ra = a.executeQuery(); ResultSet rb = b.executeQuery()) {
					boolean ma = true, mb = true;
					while (ma || mb) {
						if (ma && (ma = ra.next()))
							System.out.println("a " + row(ra));
						if (mb && (mb = rb.next()))
							System.out.println("b " + row(rb));
					}
				}
			}
			c.commit();
		}
	}
}
