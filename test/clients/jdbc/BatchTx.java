// JDBC (pgjdbc) executeBatch in autocommit mode: the driver sends every Bind/Execute of the
// batch before one Sync, so on Postgres the batch is one implicit transaction (a failing row
// rolls back the rows before it). Each argument is "<id>:<country>"; the rows go into
// customers (id, 'batch <id>', country). Prints the outcome ("ok <counts>" or "error
// <SQLSTATE> <counts>"), then "rows <ids present>". With "tx" as the first argument the batch
// runs inside conn.setAutoCommit(false) + commit (rolled back after an error).
// Run: java -cp /usr/share/java/postgresql.jar BatchTx.java <url> [tx] <id>:<country>...
import java.sql.*;
import java.util.Arrays;

public class BatchTx {
	public static void main(String[] args) throws Exception {
		int first = 1;
		boolean tx = args.length > 1 && args[1].equals("tx");
		if (tx)
			first = 2;
		StringBuilder ids = new StringBuilder();
		try (Connection conn = DriverManager.getConnection(args[0])) {
			conn.setAutoCommit(!tx);
			PreparedStatement ins = conn.prepareStatement(
				"insert into customers (id, name, country) values (?, ?, ?)");
			for (int i = first; i < args.length; i++) {
				String[] f = args[i].split(":");
				ins.setLong(1, Long.parseLong(f[0]));
				ins.setString(2, "batch " + f[0]);
				ins.setString(3, f[1]);
				ins.addBatch();
				ids.append(ids.length() > 0 ? "," : "").append(f[0]);
			}
			try {
				int[] n = ins.executeBatch();
				if (tx)
					conn.commit();
				System.out.println("ok " + Arrays.toString(n));
			} catch (BatchUpdateException e) {
				SQLException next = e.getNextException() != null ? e.getNextException() : e;
				System.out.println("error " + next.getSQLState() + " " +
						   Arrays.toString(e.getUpdateCounts()));
				if (tx)
					conn.rollback();
			}
			conn.setAutoCommit(true);
			StringBuilder present = new StringBuilder();
			try (ResultSet rs = conn.createStatement().executeQuery(
				     "select id from customers where id in (" + ids + ") order by id")) {
				while (rs.next())
					present.append(present.length() > 0 ? "," : "").append(rs.getLong(1));
			}
			System.out.println("rows " + present);
		}
	}
}
