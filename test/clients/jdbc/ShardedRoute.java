// JDBC (pgjdbc) parameterised statements on a sharded database through neki: every statement
// is routed by its bound value. With prepareThreshold=1 the driver sends Parse (named
// statement) before any Bind, and re-binds the same statement for the next value.
// For each id: INSERT (id, 'jdbc <id>'), SELECT name by id, UPDATE name by id, SELECT again;
// prints "<id> <name read after insert> <name read after update> <update count>" per id.
// Run: java -cp /usr/share/java/postgresql.jar ShardedRoute.java <url> <id>...
import java.sql.*;

public class ShardedRoute {
	public static void main(String[] args) throws Exception {
		try (Connection conn = DriverManager.getConnection(args[0])) {
			PreparedStatement ins = conn.prepareStatement(
				"insert into customers (id, name, country) values (?, ?, 'FR')");
			PreparedStatement sel = conn.prepareStatement(
				"select name from customers where id = ?");
			PreparedStatement upd = conn.prepareStatement(
				"update customers set name = ? where id = ?");
			for (int i = 1; i < args.length; i++) {
				long id = Long.parseLong(args[i]);
				ins.setLong(1, id);
				ins.setString(2, "jdbc " + id);
				ins.executeUpdate();
				String first = read(sel, id);
				upd.setString(1, "jdbc upd " + id);
				upd.setLong(2, id);
				int n = upd.executeUpdate();
				System.out.println(id + "|" + first + "|" + read(sel, id) + "|" + n);
			}
		}
	}

	static String read(PreparedStatement sel, long id) throws SQLException {
		sel.setLong(1, id);
		try (ResultSet rs = sel.executeQuery()) {
			StringBuilder b = new StringBuilder();
			while (rs.next())
				b.append(b.length() > 0 ? "," : "").append(rs.getString(1));
			return b.toString();
		}
	}
}
