// The __neki functions through pgjdbc's PreparedStatement (extended protocol, bound
// parameters): prints one line per call, "<function>=<first column of the first row>";
// then a statement's metadata before it runs ("describe=<column>:<type>:<param types>") and
// a call composed in a larger statement ("composed=<count>").
import java.sql.*;

public class NekiCalls {
    public static void main(String[] args) throws Exception {
        try (Connection c = DriverManager.getConnection(args[0])) {
            try (PreparedStatement ps = c.prepareStatement(
                    "SELECT * FROM __neki.get_data_topology_revision()");
                 ResultSet rs = ps.executeQuery()) {
                rs.next();
                System.out.println("revision=" + rs.getLong(1));
            }
            long rev;
            try (Statement st = c.createStatement();
                 ResultSet rs = st.executeQuery(
                     "SELECT * FROM __neki.get_data_topology_revision()")) {
                rs.next();
                rev = rs.getLong(1);
            }
            for (int i = 0; i < 3; i++) {
                try (PreparedStatement ps = c.prepareStatement(
                        "SELECT * FROM __neki.wait_for_data_topology(?, ?::interval)")) {
                    ps.setLong(1, rev);
                    ps.setString(2, "10 seconds");
                    try (ResultSet rs = ps.executeQuery()) {
                        rs.next();
                        System.out.println("wait=" + rs.getLong(1));
                    }
                }
            }
            try (PreparedStatement ps = c.prepareStatement(
                    "SELECT name, required_role FROM __neki.list_metafuncs()");
                 ResultSet rs = ps.executeQuery()) {
                int n = 0;
                while (rs.next())
                    n++;
                System.out.println("metafuncs=" + (n > 5));
            }
            // described before it runs (Parse + Describe of the statement)
            try (PreparedStatement ps = c.prepareStatement(
                    "SELECT * FROM __neki.wait_for_data_topology(?, ?::interval)")) {
                ResultSetMetaData md = ps.getMetaData();
                ParameterMetaData pm = ps.getParameterMetaData();
                System.out.println("describe=" + md.getColumnName(1) + ":" +
                                   md.getColumnTypeName(1) + ":" + pm.getParameterTypeName(1) +
                                   ":" + pm.getParameterTypeName(2));
            }
            // a call inside a larger statement, with a parameter outside it
            try (PreparedStatement ps = c.prepareStatement(
                    "SELECT count(*) FROM __neki.list_shards() WHERE uid <> ?")) {
                ps.setString(1, "x");
                try (ResultSet rs = ps.executeQuery()) {
                    rs.next();
                    System.out.println("composed=" + rs.getLong(1));
                }
            }
        }
    }
}
