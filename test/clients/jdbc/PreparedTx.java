// JDBC (pgjdbc, prepareThreshold=1: server-side named statements from the first use) through
// neki in transaction mode: N clients x M transactions; prints "errors=<n> rows=<n>".
// Run: java -cp /usr/share/java/postgresql.jar PreparedTx.java <url> <clients> <txns>
import java.sql.*;
import java.util.concurrent.atomic.AtomicInteger;

public class PreparedTx {
	public static void main(String[] args) throws Exception {
		String url = args[0];
		int clients = Integer.parseInt(args[1]), txns = Integer.parseInt(args[2]);
		AtomicInteger errors = new AtomicInteger(), rows = new AtomicInteger();
		Thread[] ts = new Thread[clients];
		for (int c = 0; c < clients; c++) {
			final int id = c;
			ts[c] = new Thread(() -> {
				try (Connection conn = DriverManager.getConnection(url)) {
					conn.setAutoCommit(false);
					PreparedStatement ins = conn.prepareStatement("insert into jt values (?, ?)");
					PreparedStatement sel = conn.prepareStatement("select v from jt where k = ?");
					for (int i = 0; i < txns; i++) {
						ins.setInt(1, id * 100000 + i);
						ins.setInt(2, i);
						ins.executeUpdate();
						sel.setInt(1, id * 100000 + i);
						try (ResultSet rs = sel.executeQuery()) {
							if (rs.next() && rs.getInt(1) == i)
								rows.incrementAndGet();
						}
						conn.commit();
					}
				} catch (Exception e) {
					errors.incrementAndGet();
					System.err.println("client " + id + ": " + e);
				}
			});
			ts[c].start();
		}
		for (Thread t : ts)
			t.join();
		System.out.println("errors=" + errors.get() + " rows=" + rows.get());
	}
}
