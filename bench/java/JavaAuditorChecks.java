// The Java Auditor's periodic checks, one run each, timed: the other side of bench/replicas_check.py.
//
//   java -cp CLASSES:BK_HOME/lib/* JavaAuditorChecks replicas|placement|checkall|indexer METADATA_URI
//
// Builds what org.apache.bookkeeper.replication.Auditor builds for its tasks (a system-role client from
// a ServerConfiguration, BookKeeperAdmin, the ledger manager and the under-replication manager of the
// client's ledger manager factory), constructs AuditorReplicasCheckTask, AuditorPlacementPolicyCheckTask or
// AuditorCheckAllLedgersTask (checkAllLedgers, auditorLedgerVerificationPercentage 0 as shipped; it marks
// what it finds under-replicated, nothing on a healthy cluster) (package-private: through reflection), runs the task's runTask() once on this thread and prints one
// JSON line: the check, the seconds runTask took (client start-up excluded, as ours excludes process
// start-up) and the task's own gauges. `indexer` times BookieLedgerIndexer.getBookieToLedgerIndex() instead,
// the metadata walk of every bookie check (the other side of bench/metadata_scan.py), and prints the
// ledgers it indexed. Nothing here decides anything: it is Java's code, timed.

import java.lang.reflect.Constructor;
import java.lang.reflect.Method;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.BiConsumer;
import org.apache.bookkeeper.client.BookKeeper;
import org.apache.bookkeeper.client.BookKeeperAdmin;
import org.apache.bookkeeper.conf.ClientConfiguration;
import org.apache.bookkeeper.conf.ServerConfiguration;
import org.apache.bookkeeper.meta.LedgerManager;
import org.apache.bookkeeper.meta.LedgerManagerFactory;
import org.apache.bookkeeper.meta.LedgerUnderreplicationManager;
import org.apache.bookkeeper.replication.AuditorStats;
import org.apache.bookkeeper.replication.BookieLedgerIndexer;
import org.apache.bookkeeper.stats.NullStatsLogger;

public final class JavaAuditorChecks {
    public static void main(String[] argv) throws Exception {
        if (argv.length != 2 || !(argv[0].equals("replicas") || argv[0].equals("placement")
                || argv[0].equals("checkall") || argv[0].equals("indexer"))) {
            System.err.println("usage: JavaAuditorChecks replicas|placement|checkall|indexer METADATA_URI");
            System.exit(2);
        }
        String which = argv[0];
        ServerConfiguration sc = new ServerConfiguration();
        sc.setMetadataServiceUri(argv[1]);
        sc.setZkTimeout(6000);
        sc.setAllowLoopback(true);
        ClientConfiguration cc = new ClientConfiguration(sc);
        cc.setClientRole(ClientConfiguration.CLIENT_ROLE_SYSTEM);
        BookKeeper bkc = BookKeeper.forConfig(cc).statsLogger(NullStatsLogger.INSTANCE).build();
        BookKeeperAdmin admin = new BookKeeperAdmin(bkc, NullStatsLogger.INSTANCE, new ClientConfiguration(sc));
        LedgerManagerFactory factory = bkc.getLedgerManagerFactory();
        LedgerManager ledgers = factory.newLedgerManager();
        LedgerUnderreplicationManager underreplication = factory.newLedgerUnderreplicationManager();
        AuditorStats stats = new AuditorStats(NullStatsLogger.INSTANCE);
        BiConsumer<AtomicBoolean, Throwable> noBookieCheckRunning = (has, error) -> has.set(false);
        if (which.equals("indexer")) {
            long t0 = System.nanoTime();
            Map<String, Set<Long>> index = new BookieLedgerIndexer(ledgers).getBookieToLedgerIndex();
            double seconds = (System.nanoTime() - t0) / 1e9;
            Set<Long> all = new HashSet<>();
            index.values().forEach(all::addAll);
            System.out.println("{\"check\":\"indexer\",\"seconds\":" + seconds + ",\"ledgers\":" + all.size()
                    + ",\"bookies\":" + index.size() + "}");
            System.out.flush();
            Runtime.getRuntime().halt(0);
        }

        String name = which.equals("replicas") ? "AuditorReplicasCheckTask"
                : which.equals("placement") ? "AuditorPlacementPolicyCheckTask" : "AuditorCheckAllLedgersTask";
        Class<?> cls = Class.forName("org.apache.bookkeeper.replication." + name);
        Constructor<?> ctor = cls.getDeclaredConstructors()[0];
        ctor.setAccessible(true);
        Object task = ctor.newInstance(sc, stats, admin, ledgers, underreplication, null, noBookieCheckRunning);
        Method run = cls.getDeclaredMethod("runTask");
        run.setAccessible(true);

        long t0 = System.nanoTime();
        run.invoke(task);
        double seconds = (System.nanoTime() - t0) / 1e9;

        StringBuilder out = new StringBuilder("{\"check\":\"" + which + "\",\"seconds\":" + seconds);
        for (String gauge : new String[] {
                "NumLedgersHavingNoReplicaOfAnEntryGuageValue",
                "NumLedgersHavingLessThanAQReplicasOfAnEntryGuageValue",
                "NumLedgersHavingLessThanWQReplicasOfAnEntryGuageValue",
                "LedgersNotAdheringToPlacementPolicyGuageValue",
                "LedgersSoftlyAdheringToPlacementPolicyGuageValue"}) {
            Method get = AuditorStats.class.getDeclaredMethod("get" + gauge);
            get.setAccessible(true);
            out.append(",\"").append(gauge).append("\":").append(get.invoke(stats));
        }
        System.out.println(out.append("}"));
        System.out.flush();
        Runtime.getRuntime().halt(0);
    }
}
