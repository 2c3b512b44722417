// User-defined types through pgjdbc on a sharded database (test/routing/test_type_oids.py):
// for each customer id (one per shard), the result's type names (pgjdbc resolves the
// RowDescription's OIDs through pg_type and caches them), the values, and an UPDATE binding
// a PGobject of type mood (its OID, looked up by name, goes into the Parse). Prints
// "<id>|<type of m>|<type of a>|<m>|<a>|<rows updated>" per id.
// Run: java -cp postgresql.jar TypeOids.java <url> <id>...
import java.sql.*;
import org.postgresql.util.PGobject;

public class TypeOids {
    public static void main(String[] args) throws Exception {
        try (Connection c = DriverManager.getConnection(args[0])) {
            for (int i = 1; i < args.length; i++) {
                long id = Long.parseLong(args[i]);
                StringBuilder out = new StringBuilder(args[i]);
                for (int k = 0; k < 2; k++) {	// twice: the second reads the cached names
                    out.setLength(args[i].length());
                    try (PreparedStatement ps = c.prepareStatement(
                            "SELECT m, a FROM customers WHERE id = ?")) {
                        ps.setLong(1, id);
                        try (ResultSet rs = ps.executeQuery()) {
                            ResultSetMetaData md = rs.getMetaData();
                            rs.next();
                            out.append('|').append(md.getColumnTypeName(1));
                            out.append('|').append(md.getColumnTypeName(2));
                            out.append('|').append(rs.getString(1));
                            out.append('|').append(rs.getString(2));
                        }
                    }
                }
                PGobject mood = new PGobject();
                mood.setType("mood");
                mood.setValue("happy");
                try (PreparedStatement ps = c.prepareStatement(
                        "UPDATE customers SET m = ? WHERE id = ?")) {
                    ps.setObject(1, mood);
                    ps.setLong(2, id);
                    out.append('|').append(ps.executeUpdate());
                }
                System.out.println(out);
            }
        }
    }
}
