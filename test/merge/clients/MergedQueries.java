// JDBC (pgjdbc: extended protocol, named statements, binary results after prepareThreshold)
// runs merged SELECTs with parameters and prints every result; the test compares the output
// through neki with the output on the reference server.
// Run: java -cp postgresql.jar MergedQueries.java <jdbc url>
import java.sql.*;

public class MergedQueries {
	static final String[] QUERIES = {
		"SELECT id, n, s FROM t WHERE x > ? ORDER BY n DESC NULLS LAST, id LIMIT ? OFFSET ?",
		"SELECT g, count(*), sum(x), avg(n), min(s), max(d) FROM t WHERE x > ? GROUP BY g ORDER BY g",
		"SELECT g, count(*) FROM t GROUP BY g HAVING count(*) > ? ORDER BY g",
		"SELECT DISTINCT g FROM t WHERE x < ? ORDER BY g DESC",
		"SELECT id, v FROM big WHERE v > ? ORDER BY v DESC, id LIMIT ?",
		"SELECT g, sum(DISTINCT x), stddev(n), string_agg(DISTINCT s, ',' ORDER BY s) FROM t "
		+ "WHERE x > ? GROUP BY g HAVING g > ? ORDER BY g",
		"SELECT g, jsonb_agg(x ORDER BY id), array_agg(DISTINCT x ORDER BY x), var_pop(x) FROM t "
		+ "WHERE x < ? GROUP BY g ORDER BY g",
	};
	static final int[][] PARAMS = { {0, 5, 2}, {-20}, {25}, {0}, {990, 7}, {-30, 1}, {0} };

	public static void main(String[] args) throws Exception {
		try (Connection c = DriverManager.getConnection(args[0])) {
			for (int round = 0; round < 3; round++)	/* named + binary after the threshold */
				for (int q = 0; q < QUERIES.length; q++) {
					try (PreparedStatement ps = c.prepareStatement(QUERIES[q])) {
						for (int i = 0; i < PARAMS[q].length; i++)
							ps.setInt(i + 1, PARAMS[q][i]);
						try (ResultSet rs = ps.executeQuery()) {
							ResultSetMetaData md = rs.getMetaData();
							StringBuilder sb = new StringBuilder("Q" + q + ":");
							for (int i = 1; i <= md.getColumnCount(); i++)
								sb.append(' ').append(md.getColumnLabel(i)).append('/')
								  .append(md.getColumnTypeName(i));
							System.out.println(sb);
							while (rs.next()) {
								sb = new StringBuilder(" ");
								for (int i = 1; i <= md.getColumnCount(); i++)
									sb.append(rs.getString(i)).append('|');
								System.out.println(sb);
							}
						}
					}
				}
		}
	}
}
