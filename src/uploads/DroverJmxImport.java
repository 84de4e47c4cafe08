// drover's JMX importer: a JVM that drover keeps running beside the node, so that an import
// costs one JMX call instead of a nodetool JVM start (about a second of CPU and of waiting).
// It is run in Java's source-file mode (`java DroverJmxImport.java HOST PORT`), so nothing is
// compiled when drover is built. Only the JDK's own JMX client is used: no Cassandra jars.
//
// Protocol (UTF-8 lines; every free-text field hex-encoded so tabs, newlines and any byte
// in a path survive):
//   request:  ID \t KEYSPACE \t TABLE \t FLAGS \t DIR [\t DIR ...]
//             FLAGS: seven 0/1 characters, the arguments of importNewSSTables in order
//             (resetLevel, clearRepaired, verifySSTables, verifyTokens, invalidateCaches,
//             extendedVerify, copyData)
//   reply:    ID \t ok \t [FAILED_DIR[,FAILED_DIR...]]
//             ID \t err \t MESSAGE
// Requests run concurrently (drover sends one at a time per table). End of input ends it.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import javax.management.MBeanServerConnection;
import javax.management.ObjectName;
import javax.management.remote.JMXConnector;
import javax.management.remote.JMXConnectorFactory;
import javax.management.remote.JMXServiceURL;

public class DroverJmxImport {
    private static String host;
    private static int port;
    private static JMXConnector connector;
    private static PrintStream out;

    public static void main(String[] args) throws Exception {
        host = args[0];
        port = Integer.parseInt(args[1]);
        out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
        ExecutorService pool = Executors.newCachedThreadPool(r -> {
            Thread t = new Thread(r);
            t.setDaemon(true);
            return t;
        });
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        out.println("ready");
        String line;
        while ((line = in.readLine()) != null) {
            String[] fields = line.split("\t", -1);
            pool.submit(() -> handle(fields));
        }
        // drover went away: let the imports under way end (the node would finish them
        // anyway), then go.
        pool.shutdown();
        pool.awaitTermination(1, java.util.concurrent.TimeUnit.DAYS);
        System.exit(0);
    }

    private static void handle(String[] f) {
        String id = f.length > 0 ? f[0] : "";
        try {
            if (f.length < 5 || f[3].length() != 7) {
                throw new IllegalArgumentException("malformed request of " + f.length + " fields");
            }
            String keyspace = unhex(f[1]);
            String table = unhex(f[2]);
            Set<String> dirs = new HashSet<>();
            for (int i = 4; i < f.length; i++) {
                dirs.add(unhex(f[i]));
            }
            Object[] params = new Object[8];
            String[] signature = new String[8];
            params[0] = dirs;
            signature[0] = Set.class.getName();
            for (int i = 0; i < 7; i++) {
                params[i + 1] = f[3].charAt(i) == '1';
                signature[i + 1] = boolean.class.getName();
            }
            ObjectName bean = new ObjectName(
                    "org.apache.cassandra.db:type=ColumnFamilies,keyspace=" + keyspace + ",columnfamily=" + table);
            Object result;
            try {
                result = connection(false).invoke(bean, "importNewSSTables", params, signature);
            } catch (java.io.IOException e) {
                // A connection that went stale (the node restarted): one new one.
                result = connection(true).invoke(bean, "importNewSSTables", params, signature);
            }
            StringBuilder failed = new StringBuilder();
            if (result instanceof List) {
                for (Object dir : (List<?>) result) {
                    if (failed.length() > 0) {
                        failed.append(',');
                    }
                    failed.append(hex(String.valueOf(dir)));
                }
            }
            reply(id + "\tok\t" + failed);
        } catch (Throwable e) {
            reply(id + "\terr\t" + hex(describe(e)));
        }
    }

    private static synchronized MBeanServerConnection connection(boolean fresh) throws java.io.IOException {
        if (fresh && connector != null) {
            try {
                connector.close();
            } catch (Exception ignored) {
                // closing a broken connection may fail; a new one follows
            }
            connector = null;
        }
        if (connector == null) {
            String at = host.contains(":") ? "[" + host + "]" : host;
            JMXServiceURL url = new JMXServiceURL("service:jmx:rmi:///jndi/rmi://" + at + ":" + port + "/jmxrmi");
            connector = JMXConnectorFactory.connect(url);
        }
        return connector.getMBeanServerConnection();
    }

    private static synchronized void reply(String line) {
        out.println(line);
    }

    // The exception and those of its causes that say something new.
    private static String describe(Throwable e) {
        List<String> parts = new ArrayList<>();
        String said = "";
        for (Throwable t = e; t != null && parts.size() < 8; t = t.getCause()) {
            String message = t.getMessage() == null ? "" : t.getMessage();
            if (parts.isEmpty() || !said.contains(message)) {
                parts.add(t.getClass().getName() + (message.isEmpty() ? "" : ": " + message));
                said += message;
            }
            if (t.getCause() == t) {
                break;
            }
        }
        return String.join("; caused by ", parts);
    }

    private static String hex(String s) {
        StringBuilder b = new StringBuilder();
        for (byte x : s.getBytes(StandardCharsets.UTF_8)) {
            b.append(Character.forDigit((x >> 4) & 0xf, 16)).append(Character.forDigit(x & 0xf, 16));
        }
        return b.toString();
    }

    private static String unhex(String h) {
        byte[] bytes = new byte[h.length() / 2];
        for (int i = 0; i < bytes.length; i++) {
            bytes[i] = (byte) Integer.parseInt(h.substring(2 * i, 2 * i + 2), 16);
        }
        return new String(bytes, StandardCharsets.UTF_8);
    }
}
