import io.netty.util.HashedWheelTimer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.apache.bookkeeper.client.BKException.BKNotEnoughBookiesException;
import org.apache.bookkeeper.client.BookiesHealthInfo;
import org.apache.bookkeeper.client.DistributionSchedule;
import org.apache.bookkeeper.client.EnsemblePlacementPolicy;
import org.apache.bookkeeper.client.api.BookKeeper;
import org.apache.bookkeeper.client.api.DigestType;
import org.apache.bookkeeper.client.api.LedgerMetadata;
import org.apache.bookkeeper.client.api.ReadHandle;
import org.apache.bookkeeper.client.api.WriteAdvHandle;
import org.apache.bookkeeper.client.api.WriteHandle;
import org.apache.bookkeeper.conf.ClientConfiguration;
import org.apache.bookkeeper.conf.ServerConfiguration;
import org.apache.bookkeeper.replication.ReplicationWorker;
import org.apache.bookkeeper.feature.FeatureProvider;
import org.apache.bookkeeper.net.BookieId;
import org.apache.bookkeeper.net.DNSToSwitchMapping;
import org.apache.bookkeeper.proto.BookieAddressResolver;
import org.apache.bookkeeper.stats.StatsLogger;

/**
 * bk-auditor's test ledger tool: drives the real BookKeeper Java client and prints one JSON line.
 *
 * Commands:
 *   create  [--count N] --ensemble E --write-quorum W --ack-quorum A --digest CRC32|CRC32C|MAC|DUMMY --password P
 *           --entries N --entry-size B [--ledger-id ID] [--custom k=v]... [--bookies a,b,c]
 *           [--allowed a,b,...] [--leave-open] [--pause-after K --pause-file F] [--store-ctime]
 *   recover --ledger-id ID [--password P]      open with recovery: fences and closes the ledger
 *   delete  --ledger-id ID
 *   info    --ledger-id ID [--password P]      open without recovery, print metadata
 *   read    --ledger-id ID --entry-size B [--password P]
 *                                              open without recovery and read every entry 0..LAC through
 *                                              the normal client; reports the entries whose content is not
 *                                              the payload this tool wrote
 *   copies  --ledgers ID[:END],... [--password P]
 *                                              census of the stored copies: every entry up to END
 *                                              (default: the metadata's last entry) is read from each
 *                                              bookie of its write set by the real BookieClient and its
 *                                              digest verified; one JSON line per ledger lists per bookie
 *                                              the entries missing, corrupt or unreadable there
 *   replication-worker --seconds S             run only a Java ReplicationWorker (no auditor, no
 *                                              election) for S seconds: it acts on under-replication
 *                                              markers exactly as in AutoRecoveryMain
 *   auditor --seconds S --id HOST:PORT         run only a Java Auditor (its election, no worker) for S
 *                                              seconds, lostBookieRecoveryDelay 0, periodic checks off
 *                                              (bench/lost_bookie.py)
 *
 * Every command but replication-worker takes --client-conf FILE: extra client keys (e.g. TLS to the
 * bookies) loaded before the tool's own settings.
 *
 * Entry e of ledger L carries the payload ("L" + L + "E" + e + "-") repeated and cut to B bytes, so
 * tests can verify what they read without storing it.
 *
 * Placement: --bookies pins the first ensemble exactly; --allowed restricts every later choice (new
 * ensembles and replacements after a failure). Both are passed to the placement policy below through
 * system properties, because the client instantiates the policy itself by reflection.
 */
public class BkLedgerTool {

    static final String PROP_FIRST = "bktool.ensemble";
    static final String PROP_ALLOWED = "bktool.allowed";

    public static void main(String[] argv) throws Exception {
        if (argv.length < 1) {
            fail("usage: BkLedgerTool create|recover|delete|info --metadata-uri URI [options]");
        }
        String cmd = argv[0];
        Map<String, List<String>> opts = parse(Arrays.copyOfRange(argv, 1, argv.length));
        String uri = one(opts, "metadata-uri", null);
        if (uri == null) {
            fail("--metadata-uri is required");
        }
        if (opts.containsKey("bookies")) {
            System.setProperty(PROP_FIRST, one(opts, "bookies", ""));
        }
        if (opts.containsKey("allowed")) {
            System.setProperty(PROP_ALLOWED, one(opts, "allowed", ""));
        }
        if (cmd.equals("replication-worker")) {
            replicationWorker(uri, Integer.parseInt(one(opts, "seconds", "60")));
            return;
        }
        if (cmd.equals("auditor")) {
            auditorOnly(uri, one(opts, "id", "127.0.0.1:3999"), Integer.parseInt(one(opts, "seconds", "60")));
            return;
        }
        ClientConfiguration conf = new ClientConfiguration();
        if (opts.containsKey("client-conf")) {
            // Extra client keys (e.g. TLS to the bookies), read as the Java client reads its own file.
            conf.loadConf(new java.io.File(one(opts, "client-conf", "")).toURI().toURL());
        }
        conf.setMetadataServiceUri(uri);
        conf.setZkTimeout(6000);
        conf.setAddEntryTimeout(2);
        conf.setReadEntryTimeout(2);
        conf.setEnsemblePlacementPolicy(PinnedPlacementPolicy.class);
        if (opts.containsKey("store-ctime")) {
            conf.setStoreSystemtimeAsLedgerCreationTime(true);
        }
        int rc = 0;
        try (BookKeeper bk = BookKeeper.newBuilder(conf).build()) {
            switch (cmd) {
                case "create":
                    int count = Integer.parseInt(one(opts, "count", "1"));
                    for (int i = 0; i < count; i++) {
                        create(bk, opts);
                    }
                    break;
                case "recover":
                    recover(bk, opts, true);
                    break;
                case "info":
                    recover(bk, opts, false);
                    break;
                case "delete":
                    // --ledger-id takes one id or a comma-separated list (one JVM for many deletions).
                    for (String one : one(opts, "ledger-id", "-1").split(",")) {
                        long id = Long.parseLong(one.trim());
                        bk.newDeleteLedgerOp().withLedgerId(id).execute().get(30, TimeUnit.SECONDS);
                        emit("{\"ledgerId\":" + id + ",\"deleted\":true}");
                    }
                    break;
                case "read":
                    readAll(bk, opts);
                    break;
                case "copies":
                    copies((org.apache.bookkeeper.client.BookKeeper) bk, conf, opts);
                    break;
                default:
                    fail("unknown command " + cmd);
            }
        } catch (Exception e) {
            System.out.println("{\"error\":" + str(e.toString()) + "}");
            System.out.flush();
            rc = 3;
        }
        // The client keeps non-daemon threads; exit explicitly once the result is printed.
        Runtime.getRuntime().halt(rc);
    }

    static void create(BookKeeper bk, Map<String, List<String>> opts) throws Exception {
        int e = Integer.parseInt(one(opts, "ensemble", "3"));
        int w = Integer.parseInt(one(opts, "write-quorum", "2"));
        int a = Integer.parseInt(one(opts, "ack-quorum", "2"));
        DigestType digest = DigestType.valueOf(one(opts, "digest", "CRC32C"));
        String password = one(opts, "password", "");
        int entries = Integer.parseInt(one(opts, "entries", "10"));
        int size = Integer.parseInt(one(opts, "entry-size", "64"));
        long pauseAfter = Long.parseLong(one(opts, "pause-after", "-1"));
        String pauseFile = one(opts, "pause-file", null);
        boolean leaveOpen = opts.containsKey("leave-open");
        Map<String, byte[]> custom = new LinkedHashMap<>();
        for (String kv : opts.getOrDefault("custom", Collections.emptyList())) {
            int i = kv.indexOf('=');
            if (i < 0) {
                fail("--custom wants k=v, got " + kv);
            }
            custom.put(kv.substring(0, i), kv.substring(i + 1).getBytes(StandardCharsets.UTF_8));
        }
        String ledgerIdOpt = one(opts, "ledger-id", null);

        WriteHandle wh = null;
        WriteAdvHandle wah = null;
        long ledgerId;
        if (ledgerIdOpt != null) {
            wah = bk.newCreateLedgerOp().withEnsembleSize(e).withWriteQuorumSize(w).withAckQuorumSize(a)
                    .withDigestType(digest).withPassword(password.getBytes(StandardCharsets.UTF_8))
                    .withCustomMetadata(custom).makeAdv().withLedgerId(Long.parseLong(ledgerIdOpt))
                    .execute().get(30, TimeUnit.SECONDS);
            ledgerId = wah.getId();
        } else {
            wh = bk.newCreateLedgerOp().withEnsembleSize(e).withWriteQuorumSize(w).withAckQuorumSize(a)
                    .withDigestType(digest).withPassword(password.getBytes(StandardCharsets.UTF_8))
                    .withCustomMetadata(custom).execute().get(30, TimeUnit.SECONDS);
            ledgerId = wh.getId();
        }
        List<CompletableFuture<?>> inflight = new ArrayList<>();
        // An OPEN ledger is written one entry at a time, so that each entry carries the previous LAC and
        // the bookies know LAC = N-2, as with a steady writer. Pipelined writes (200 in flight) would
        // all carry LAC -1.
        int window = leaveOpen ? 1 : 200;
        for (long entry = 0; entry < entries; entry++) {
            if (entry == pauseAfter) {
                drain(inflight);
                LedgerMetadata md = wah != null ? wah.getLedgerMetadata() : wh.getLedgerMetadata();
                System.out.println("PAUSED " + describe(ledgerId, md, entry - 1, opts, password, entries, size));
                System.out.flush();
                Path f = Paths.get(pauseFile);
                long deadline = System.currentTimeMillis() + 120_000;
                while (!Files.exists(f)) {
                    if (System.currentTimeMillis() > deadline) {
                        fail("pause file " + f + " never appeared");
                    }
                    Thread.sleep(50);
                }
            }
            byte[] data = payload(ledgerId, entry, size);
            inflight.add(wah != null ? wah.writeAsync(entry, data) : wh.appendAsync(data));
            if (inflight.size() >= window) {
                drain(inflight);
            }
        }
        drain(inflight);
        if (leaveOpen) {
            LedgerMetadata md = wah != null ? wah.getLedgerMetadata() : wh.getLedgerMetadata();
            long lac = wah != null ? wah.getLastAddConfirmed() : wh.getLastAddConfirmed();
            emit(describe(ledgerId, md, lac, opts, password, entries, size));
            // No close and no client shutdown: the ledger stays OPEN in its metadata.
            Runtime.getRuntime().halt(0);
        }
        if (wah != null) {
            wah.close();
        } else {
            wh.close();
        }
        try (ReadHandle rh = bk.newOpenLedgerOp().withLedgerId(ledgerId).withRecovery(false)
                .withPassword(password.getBytes(StandardCharsets.UTF_8)).withDigestType(digest)
                .execute().get(30, TimeUnit.SECONDS)) {
            emit(describe(ledgerId, rh.getLedgerMetadata(), rh.getLastAddConfirmed(), opts, password, entries,
                    size));
        }
    }

    static void recover(BookKeeper bk, Map<String, List<String>> opts, boolean recovery) throws Exception {
        long id = Long.parseLong(one(opts, "ledger-id", "-1"));
        String password = one(opts, "password", "");
        try (ReadHandle rh = bk.newOpenLedgerOp().withLedgerId(id).withRecovery(recovery)
                .withPassword(password.getBytes(StandardCharsets.UTF_8))
                .execute().get(60, TimeUnit.SECONDS)) {
            emit(describe(id, rh.getLedgerMetadata(), rh.getLastAddConfirmed(), opts, password, -1, -1));
        }
    }

    /** Every entry through the real client (digest checked by it), its content compared with what we wrote. */
    static void readAll(BookKeeper bk, Map<String, List<String>> opts) throws Exception {
        long id = Long.parseLong(one(opts, "ledger-id", "-1"));
        int size = Integer.parseInt(one(opts, "entry-size", "64"));
        String password = one(opts, "password", "");
        try (ReadHandle rh = bk.newOpenLedgerOp().withLedgerId(id).withRecovery(false)
                .withPassword(password.getBytes(StandardCharsets.UTF_8))
                .execute().get(60, TimeUnit.SECONDS)) {
            long lac = rh.getLastAddConfirmed();
            long read = 0;
            List<Long> bad = new ArrayList<>();
            for (long first = 0; first <= lac; first += 100) {
                long last = Math.min(lac, first + 99);
                try (org.apache.bookkeeper.client.api.LedgerEntries es = rh.read(first, last)) {
                    for (org.apache.bookkeeper.client.api.LedgerEntry e : es) {
                        read++;
                        if (!Arrays.equals(e.getEntryBytes(), payload(id, e.getEntryId(), size))) {
                            bad.add(e.getEntryId());
                        }
                    }
                }
            }
            emit("{\"ledgerId\":" + id + ",\"lastEntryId\":" + lac + ",\"read\":" + read + ",\"badContent\":"
                    + bad + "}");
        }
    }

    /** Which copies each bookie really holds: ground truth for the chaos campaign, from Java alone. */
    static void copies(org.apache.bookkeeper.client.BookKeeper bk, ClientConfiguration conf,
                       Map<String, List<String>> opts) throws Exception {
        byte[] password = one(opts, "password", "pw").getBytes(StandardCharsets.UTF_8);
        io.netty.channel.EventLoopGroup group = new io.netty.channel.nio.NioEventLoopGroup(2);
        org.apache.bookkeeper.common.util.OrderedExecutor executor =
                org.apache.bookkeeper.common.util.OrderedExecutor.newBuilder().numThreads(2).name("copies").build();
        java.util.concurrent.ScheduledExecutorService scheduler =
                java.util.concurrent.Executors.newSingleThreadScheduledExecutor();
        org.apache.bookkeeper.proto.BookieClient client = new org.apache.bookkeeper.proto.BookieClientImpl(
                conf, group, io.netty.buffer.UnpooledByteBufAllocator.DEFAULT, executor, scheduler,
                org.apache.bookkeeper.stats.NullStatsLogger.INSTANCE, bk.getBookieAddressResolver());
        for (String spec : one(opts, "ledgers", "").split(",")) {
            if (spec.isEmpty()) {
                continue;
            }
            String[] parts = spec.split(":");
            long id = Long.parseLong(parts[0]);
            LedgerMetadata md;
            try {
                md = bk.getLedgerManager().readLedgerMetadata(id).get(30, TimeUnit.SECONDS).getValue();
            } catch (Exception e) {
                emit("{\"ledgerId\":" + id + ",\"metadataError\":" + str(e.toString()) + "}");
                continue;
            }
            long end = parts.length > 1 ? Long.parseLong(parts[1]) : md.getLastEntryId();
            org.apache.bookkeeper.proto.checksum.DigestManager digest =
                    org.apache.bookkeeper.proto.checksum.DigestManager.instantiate(id, password,
                            org.apache.bookkeeper.client.BookKeeper.DigestType.toProtoDigestType(
                                    org.apache.bookkeeper.client.BookKeeper.DigestType.fromApiDigestType(
                                            md.getDigestType())),
                            io.netty.buffer.UnpooledByteBufAllocator.DEFAULT, false);
            org.apache.bookkeeper.client.RoundRobinDistributionSchedule schedule =
                    new org.apache.bookkeeper.client.RoundRobinDistributionSchedule(
                            md.getWriteQuorumSize(), md.getAckQuorumSize(), md.getEnsembleSize());
            Map<String, List<Long>> missing = new java.util.TreeMap<>();
            Map<String, List<Long>> corrupt = new java.util.TreeMap<>();
            Map<String, List<Long>> unreadable = new java.util.TreeMap<>();
            List<CompletableFuture<Void>> reads = new ArrayList<>();
            for (long entry = 0; entry <= end; entry++) {
                List<BookieId> ensemble = md.getEnsembleAt(entry);
                DistributionSchedule.WriteSet ws = schedule.getWriteSet(entry);
                for (int k = 0; k < ws.size(); k++) {
                    BookieId bookie = ensemble.get(ws.get(k));
                    final long eid = entry;
                    CompletableFuture<Void> done = new CompletableFuture<>();
                    reads.add(done);
                    client.readEntry(bookie, id, eid, (rc, lid, e2, buffer, ctx) -> {
                        synchronized (missing) {
                            if (rc == org.apache.bookkeeper.client.BKException.Code.NoSuchEntryException
                                    || rc == org.apache.bookkeeper.client.BKException.Code.NoSuchLedgerExistsException) {
                                missing.computeIfAbsent(bookie.toString(), x -> new ArrayList<>()).add(eid);
                            } else if (rc != org.apache.bookkeeper.client.BKException.Code.OK) {
                                unreadable.computeIfAbsent(bookie.toString(), x -> new ArrayList<>()).add(eid);
                            } else {
                                try {
                                    digest.verifyDigestAndReturnData(eid, buffer);
                                } catch (Exception bad) {
                                    corrupt.computeIfAbsent(bookie.toString(), x -> new ArrayList<>()).add(eid);
                                }
                            }
                        }
                        done.complete(null);
                    }, null, org.apache.bookkeeper.proto.BookieProtocol.FLAG_NONE);
                }
                ws.recycle();
            }
            for (CompletableFuture<Void> f : reads) {
                f.get(60, TimeUnit.SECONDS);
            }
            emit("{\"ledgerId\":" + id + ",\"state\":" + str(md.getState().toString()) + ",\"checkedUpTo\":" + end
                    + ",\"reads\":" + reads.size() + ",\"missing\":" + lists(missing) + ",\"corrupt\":"
                    + lists(corrupt) + ",\"unreadable\":" + lists(unreadable) + "}");
        }
        client.close();
        group.shutdownGracefully();
        executor.shutdown();
        scheduler.shutdown();
    }

    static String lists(Map<String, List<Long>> m) {
        StringBuilder sb = new StringBuilder("{");
        for (Map.Entry<String, List<Long>> e : m.entrySet()) {
            List<Long> v = new ArrayList<>(e.getValue());
            Collections.sort(v);
            sb.append(sb.length() > 1 ? "," : "").append(str(e.getKey())).append(":").append(v);
        }
        return sb.append('}').toString();
    }

    static void replicationWorker(String uri, int seconds) throws Exception {
        ServerConfiguration sc = new ServerConfiguration();
        sc.setMetadataServiceUri(uri);
        sc.setZkTimeout(6000);
        sc.setAllowLoopback(true);
        sc.setRwRereplicateBackoffMs(500);
        sc.setOpenLedgerRereplicationGracePeriod("1000");
        sc.setLockReleaseOfFailedLedgerGracePeriod("2000");
        ReplicationWorker rw = new ReplicationWorker(sc);
        rw.start();
        emit("{\"replicationWorker\":\"started\"}");
        Thread.sleep(seconds * 1000L);
        rw.shutdown();
        emit("{\"replicationWorker\":\"stopped\"}");
        Runtime.getRuntime().halt(0);
    }

    static void auditorOnly(String uri, String id, int seconds) throws Exception {
        ServerConfiguration sc = new ServerConfiguration();
        sc.setMetadataServiceUri(uri);
        sc.setZkTimeout(6000);
        sc.setAllowLoopback(true);
        sc.setLostBookieRecoveryDelay(0);
        sc.setAuditorPeriodicCheckInterval(0);
        sc.setAuditorPeriodicBookieCheckInterval(0);
        sc.setAuditorPeriodicPlacementPolicyCheckInterval(0);
        sc.setAuditorPeriodicReplicasCheckInterval(0);
        org.apache.bookkeeper.replication.AuditorElector elector =
            new org.apache.bookkeeper.replication.AuditorElector(id, sc);
        elector.start();
        emit("{\"auditor\":\"started\"}");
        Thread.sleep(seconds * 1000L);
        elector.shutdown();
        emit("{\"auditor\":\"stopped\"}");
        Runtime.getRuntime().halt(0);
    }

    static void drain(List<CompletableFuture<?>> inflight) throws Exception {
        for (CompletableFuture<?> f : inflight) {
            f.get(60, TimeUnit.SECONDS);
        }
        inflight.clear();
    }

    static byte[] payload(long ledgerId, long entryId, int size) {
        String unit = "L" + ledgerId + "E" + entryId + "-";
        StringBuilder sb = new StringBuilder(size + unit.length());
        while (sb.length() < size) {
            sb.append(unit);
        }
        return sb.substring(0, size).getBytes(StandardCharsets.US_ASCII);
    }

    static String describe(long id, LedgerMetadata md, long lac, Map<String, List<String>> opts, String password,
                           int entries, int size) {
        StringBuilder ens = new StringBuilder("{");
        boolean first = true;
        for (Map.Entry<Long, ? extends List<BookieId>> seg : md.getAllEnsembles().entrySet()) {
            if (!first) {
                ens.append(',');
            }
            first = false;
            ens.append('"').append(seg.getKey()).append("\":[");
            List<BookieId> b = seg.getValue();
            for (int i = 0; i < b.size(); i++) {
                ens.append(i > 0 ? "," : "").append(str(b.get(i).toString()));
            }
            ens.append(']');
        }
        ens.append('}');
        return "{\"ledgerId\":" + id
                + ",\"lastEntryId\":" + md.getLastEntryId()
                + ",\"lac\":" + lac
                + ",\"state\":" + str(md.getState().toString())
                + ",\"length\":" + md.getLength()
                + ",\"digest\":" + str(md.getDigestType().toString())
                + ",\"password\":" + str(password)
                + ",\"ensembleSize\":" + md.getEnsembleSize()
                + ",\"writeQuorum\":" + md.getWriteQuorumSize()
                + ",\"ackQuorum\":" + md.getAckQuorumSize()
                + ",\"entries\":" + entries
                + ",\"entrySize\":" + size
                + ",\"ensembles\":" + ens + "}";
    }

    static void emit(String json) {
        System.out.println(json);
        System.out.flush();
    }

    static String str(String s) {
        StringBuilder sb = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                sb.append('\\').append(c);
            } else if (c < 0x20) {
                sb.append(String.format("\\u%04x", (int) c));
            } else {
                sb.append(c);
            }
        }
        return sb.append('"').toString();
    }

    static Map<String, List<String>> parse(String[] args) {
        Map<String, List<String>> out = new HashMap<>();
        for (int i = 0; i < args.length; i++) {
            if (!args[i].startsWith("--")) {
                fail("unexpected argument " + args[i]);
            }
            String key = args[i].substring(2);
            boolean flag = i + 1 >= args.length || args[i + 1].startsWith("--");
            out.computeIfAbsent(key, k -> new ArrayList<>()).add(flag ? "" : args[++i]);
        }
        return out;
    }

    static String one(Map<String, List<String>> opts, String key, String dflt) {
        List<String> v = opts.get(key);
        return v == null || v.isEmpty() ? dflt : v.get(v.size() - 1);
    }

    static void fail(String msg) {
        System.out.println("{\"error\":" + str(msg) + "}");
        System.out.flush();
        Runtime.getRuntime().halt(2);
    }

    /** Places ensembles only on the bookies a test names, so every test knows where its entries are. */
    public static class PinnedPlacementPolicy implements EnsemblePlacementPolicy {
        private final Set<BookieId> writable = Collections.synchronizedSet(new HashSet<>());

        static List<BookieId> ids(String prop) {
            String v = System.getProperty(prop);
            List<BookieId> out = new ArrayList<>();
            if (v != null && !v.isEmpty()) {
                for (String s : v.split(",")) {
                    out.add(BookieId.parse(s.trim()));
                }
            }
            return out;
        }

        @Override
        public EnsemblePlacementPolicy initialize(ClientConfiguration conf, Optional<DNSToSwitchMapping> dns,
                HashedWheelTimer timer, FeatureProvider features, StatsLogger stats,
                BookieAddressResolver resolver) {
            return this;
        }

        @Override
        public void uninitalize() {
        }

        @Override
        public Set<BookieId> onClusterChanged(Set<BookieId> writableBookies, Set<BookieId> readOnlyBookies) {
            Set<BookieId> gone = new HashSet<>(writable);
            gone.removeAll(writableBookies);
            writable.clear();
            writable.addAll(writableBookies);
            return gone;
        }

        private List<BookieId> pool(Set<BookieId> exclude) {
            List<BookieId> allowed = ids(PROP_ALLOWED);
            List<BookieId> out = new ArrayList<>();
            synchronized (writable) {
                for (BookieId b : allowed.isEmpty() ? new ArrayList<>(writable) : allowed) {
                    if (writable.contains(b) && !exclude.contains(b)) {
                        out.add(b);
                    }
                }
            }
            Collections.shuffle(out);
            return out;
        }

        @Override
        public PlacementResult<List<BookieId>> newEnsemble(int ensembleSize, int writeQuorumSize, int ackQuorumSize,
                Map<String, byte[]> customMetadata, Set<BookieId> excludeBookies)
                throws BKNotEnoughBookiesException {
            List<BookieId> pinned = ids(PROP_FIRST);
            // newEnsemble is called when a ledger is created (an ensemble change calls replaceBookie), so
            // every ledger this process creates starts on the pinned bookies.
            if (!pinned.isEmpty()) {
                if (pinned.size() != ensembleSize) {
                    throw new BKNotEnoughBookiesException();
                }
                return PlacementResult.of(pinned, PlacementPolicyAdherence.MEETS_STRICT);
            }
            List<BookieId> pool = pool(excludeBookies);
            if (pool.size() < ensembleSize) {
                throw new BKNotEnoughBookiesException();
            }
            return PlacementResult.of(new ArrayList<>(pool.subList(0, ensembleSize)),
                    PlacementPolicyAdherence.MEETS_STRICT);
        }

        @Override
        public PlacementResult<BookieId> replaceBookie(int ensembleSize, int writeQuorumSize, int ackQuorumSize,
                Map<String, byte[]> customMetadata, List<BookieId> currentEnsemble, BookieId bookieToReplace,
                Set<BookieId> excludeBookies) throws BKNotEnoughBookiesException {
            Set<BookieId> exclude = new HashSet<>(excludeBookies);
            exclude.addAll(currentEnsemble);
            List<BookieId> pool = pool(exclude);
            if (pool.isEmpty()) {
                throw new BKNotEnoughBookiesException();
            }
            return PlacementResult.of(pool.get(0), PlacementPolicyAdherence.MEETS_STRICT);
        }

        @Override
        public void registerSlowBookie(BookieId bookieSocketAddress, long entryId) {
        }

        @Override
        public DistributionSchedule.WriteSet reorderReadSequence(List<BookieId> ensemble,
                BookiesHealthInfo health, DistributionSchedule.WriteSet writeSet) {
            return writeSet;
        }

        @Override
        public DistributionSchedule.WriteSet reorderReadLACSequence(List<BookieId> ensemble,
                BookiesHealthInfo health, DistributionSchedule.WriteSet writeSet) {
            writeSet.addMissingIndices(ensemble.size());
            return writeSet;
        }
    }
}
