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
 *           [--allowed a,b,...] [--leave-open] [--one-at-a-time] [--pause-after K --pause-file F]
 *           [--store-ctime]
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
 *                                              the entries missing, corrupt or unreadable there,
 *                                              and how many entries have fewer verified copies than
 *                                              the write quorum and than the ack quorum
 *   plant   [--count N] --ensemble E --write-quorum W --ack-quorum A --digest CRC32|CRC32C|MAC|DUMMY --password P
 *           --bookies a,b,c --entry-size B --layout SPEC [--ensembles "K:x,y,z;..."]
 *                                              an OPEN ledger as a writer that died mid-write leaves it:
 *                                              created by the normal client (pinned like create), no entry
 *                                              added through it, never closed; then each entry is written
 *                                              straight to the bookies SPEC names by the real BookieClient
 *                                              (normal adds, real digest, the client's master key for P,
 *                                              piggybacked LAC e-1, length = bytes of entries 0..e), every
 *                                              add acknowledged. SPEC is ITEM;ITEM... with ITEM =
 *                                              ENTRIES=WHERE[@LAC]: ENTRIES is k or a-b; WHERE is ws (the
 *                                              entry's round-robin write set), none, or ensemble indexes
 *                                              i,j,...; @LAC overrides the piggybacked LAC (-1 <= LAC < e).
 *                                              Entries not named are written nowhere. --ensembles adds
 *                                              segments (entry K onwards on bookies x,y,z) to the OPEN
 *                                              metadata before planting (version-checked update); WHERE
 *                                              indexes refer to the ensemble in force at each entry.
 *                                              --count N plants N ledgers with the same layout; one line
 *                                              each: create's fields plus "layout" (SPEC) and "planted"
 *                                              (entry -> bookies written)
 *   replication-worker --seconds S             run only a Java ReplicationWorker (no auditor, no
 *                                              election) for S seconds: it acts on under-replication
 *                                              markers exactly as in AutoRecoveryMain
 *   auditor --seconds S --id HOST:PORT         run only a Java Auditor (its election, no worker) for S
 *                                              seconds, lostBookieRecoveryDelay 0, periodic checks off
 *                                              (bench/lost_bookie.py)
 *
 *   serve                                      run the commands above (but replication-worker and
 *                                              auditor) one per stdin line, arguments separated by
 *                                              tabs; after each its output, then a line "\u001eEND rc".
 *                                              Clients are kept per configuration between commands
 *                                              (devcluster/cluster/toolserver.py)
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
        if (argv.length == 1 && argv[0].equals("serve")) {
            serve();
            return;
        }
        if (argv.length >= 1 && (argv[0].equals("replication-worker") || argv[0].equals("auditor"))) {
            Map<String, List<String>> opts = parse(Arrays.copyOfRange(argv, 1, argv.length));
            String uri = one(opts, "metadata-uri", null);
            int seconds = Integer.parseInt(one(opts, "seconds", "60"));
            if (argv[0].equals("replication-worker")) {
                replicationWorker(uri, seconds);
            } else {
                auditorOnly(uri, one(opts, "id", "127.0.0.1:3999"), seconds);
            }
            return;
        }
        // The client keeps non-daemon threads and its close waits seconds for its worker pools: it is never
        // closed, the JVM halts once the result is printed.
        Runtime.getRuntime().halt(run(argv, new HashMap<>()));
    }

    /**
     * One command per line on stdin (its arguments separated by tabs), its output on stdout, then a line
     * END_MARK + rc. Clients are kept per configuration between commands: a test suite pays the JVM's and
     * the client's start-up once instead of once per command (devcluster/cluster/javatools.py).
     */
    static void serve() throws Exception {
        Map<String, Clients> clients = new HashMap<>();
        java.io.BufferedReader in = new java.io.BufferedReader(
                new java.io.InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            int rc;
            try {
                rc = run(line.split("\t", -1), clients);
            } catch (Throwable t) {
                emit("{\"error\":" + str(t.toString()) + "}");
                rc = 3;
            }
            emit(END_MARK + rc);
        }
        Runtime.getRuntime().halt(0);
    }

    static final String END_MARK = "\u001eEND ";

    /** A command's own failure: printed as {"error": message}, exit code 2. */
    static final class Failure extends RuntimeException {
        Failure(String message) {
            super(message);
        }
    }

    /** The clients of one configuration, kept by the server: never closed (see main). */
    static final class Clients {
        final ClientConfiguration conf;
        final org.apache.bookkeeper.client.BookKeeper bk;
        RawBookieClient raw;

        Clients(ClientConfiguration conf) throws Exception {
            this.conf = conf;
            this.bk = (org.apache.bookkeeper.client.BookKeeper) BookKeeper.newBuilder(conf).build();
        }

        // Made on first use and kept: closing one right after its last add races with the completions
        // it recycles (a NullPointerException in the close, seen in make test).
        RawBookieClient raw() throws Exception {
            if (raw == null) {
                raw = new RawBookieClient(conf, bk);
            }
            return raw;
        }
    }

    static int run(String[] argv, Map<String, Clients> clients) throws Exception {
        try {
            return runCommand(argv, clients);
        } catch (Failure f) {
            emit("{\"error\":" + str(f.getMessage()) + "}");
            return 2;
        } catch (Exception e) {
            emit("{\"error\":" + str(e.toString()) + "}");
            return 3;
        }
    }

    static int runCommand(String[] argv, Map<String, Clients> clients) throws Exception {
        if (argv.length < 1 || argv[0].isEmpty()) {
            fail("usage: BkLedgerTool create|recover|delete|info|read|copies|plant --metadata-uri URI [options]");
        }
        String cmd = argv[0];
        Map<String, List<String>> opts = parse(Arrays.copyOfRange(argv, 1, argv.length));
        String uri = one(opts, "metadata-uri", null);
        if (uri == null) {
            fail("--metadata-uri is required");
        }
        // Read by the placement policy on every choice; a kept client sees this command's values.
        setOrClear(PROP_FIRST, opts.containsKey("bookies") ? one(opts, "bookies", "") : null);
        setOrClear(PROP_ALLOWED, opts.containsKey("allowed") ? one(opts, "allowed", "") : null);
        String key = uri + "\n" + one(opts, "client-conf", "") + "\n" + opts.containsKey("store-ctime");
        Clients kept = clients.get(key);
        if (kept == null) {
            kept = new Clients(clientConf(uri, opts));
            clients.put(key, kept);
        }
        org.apache.bookkeeper.client.BookKeeper bk = kept.bk;
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
                copies(bk, kept.raw().client, opts);
                break;
            case "plant":
                plant(bk, opts, kept.raw());
                break;
            default:
                fail("unknown command " + cmd);
        }
        return 0;
    }

    static void setOrClear(String prop, String value) {
        if (value == null) {
            System.clearProperty(prop);
        } else {
            System.setProperty(prop, value);
        }
    }

    static ClientConfiguration clientConf(String uri, Map<String, List<String>> opts) throws Exception {
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
        return conf;
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
        boolean oneAtATime = opts.containsKey("one-at-a-time");
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
        // all carry LAC -1 (or whatever the acknowledgements had reached: timing decides). --one-at-a-time
        // does the same for a closed ledger, so that every stored byte is known in advance (entry e carries
        // LAC e-1).
        int window = leaveOpen || oneAtATime ? 1 : 200;
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
            return;  // never closed: the ledger stays OPEN in its metadata
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
    static void copies(org.apache.bookkeeper.client.BookKeeper bk, org.apache.bookkeeper.proto.BookieClient client,
                       Map<String, List<String>> opts) throws Exception {
        byte[] password = one(opts, "password", "pw").getBytes(StandardCharsets.UTF_8);
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
            int[] good = new int[(int) Math.max(0, end + 1)];  // verified copies per entry
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
                                    good[(int) eid]++;
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
            // Entries with fewer verified copies than the write and the ack quorum (first 50 of each).
            List<Long> belowWrite = new ArrayList<>();
            List<Long> belowAck = new ArrayList<>();
            int nBelowWrite = 0;
            int nBelowAck = 0;
            synchronized (missing) {
                for (int e = 0; e < good.length; e++) {
                    if (good[e] < md.getWriteQuorumSize()) {
                        if (nBelowWrite++ < 50) {
                            belowWrite.add((long) e);
                        }
                    }
                    if (good[e] < md.getAckQuorumSize()) {
                        if (nBelowAck++ < 50) {
                            belowAck.add((long) e);
                        }
                    }
                }
            }
            emit("{\"ledgerId\":" + id + ",\"state\":" + str(md.getState().toString()) + ",\"checkedUpTo\":" + end
                    + ",\"reads\":" + reads.size() + ",\"missing\":" + lists(missing) + ",\"corrupt\":"
                    + lists(corrupt) + ",\"unreadable\":" + lists(unreadable) + ",\"writeQuorum\":"
                    + md.getWriteQuorumSize() + ",\"ackQuorum\":" + md.getAckQuorumSize() + ",\"lastEntryId\":"
                    + md.getLastEntryId() + ",\"belowWriteQuorum\":" + nBelowWrite + ",\"belowWriteFirst\":"
                    + belowWrite + ",\"belowAckQuorum\":" + nBelowAck + ",\"belowAckFirst\":" + belowAck + "}");
        }
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

    /** The low-level BookieClient (one entry to one bookie, no ledger handle) and the threads it runs on. */
    static final class RawBookieClient {
        final io.netty.channel.EventLoopGroup group = new io.netty.channel.nio.NioEventLoopGroup(2);
        final org.apache.bookkeeper.common.util.OrderedExecutor executor =
                org.apache.bookkeeper.common.util.OrderedExecutor.newBuilder().numThreads(2).name("raw").build();
        final java.util.concurrent.ScheduledExecutorService scheduler =
                java.util.concurrent.Executors.newSingleThreadScheduledExecutor();
        final org.apache.bookkeeper.proto.BookieClient client;

        RawBookieClient(ClientConfiguration conf, org.apache.bookkeeper.client.BookKeeper bk) throws Exception {
            client = new org.apache.bookkeeper.proto.BookieClientImpl(
                    conf, group, io.netty.buffer.UnpooledByteBufAllocator.DEFAULT, executor, scheduler,
                    org.apache.bookkeeper.stats.NullStatsLogger.INSTANCE, bk.getBookieAddressResolver());
        }

    }

    /** Where `plant` writes one entry: ensemble indexes (none: nowhere) and the LAC piggybacked on it. */
    static final class Planted {
        final int[] indexes;
        final long lac;

        Planted(int[] indexes, long lac) {
            this.indexes = indexes;
            this.lac = lac;
        }
    }

    /**
     * An OPEN ledger whose entries sit exactly where --layout says, as a writer that died mid-write leaves
     * it: the ledger is created by the normal client and never closed, its entries are added straight to
     * the chosen bookies. Validation comes first, so a bad spec creates nothing.
     */
    static void plant(org.apache.bookkeeper.client.BookKeeper bk, Map<String, List<String>> opts,
                      RawBookieClient raw) throws Exception {
        int e = Integer.parseInt(one(opts, "ensemble", "3"));
        int w = Integer.parseInt(one(opts, "write-quorum", "2"));
        int a = Integer.parseInt(one(opts, "ack-quorum", "2"));
        DigestType digest = DigestType.valueOf(one(opts, "digest", "CRC32C"));
        String password = one(opts, "password", "");
        int size = Integer.parseInt(one(opts, "entry-size", "64"));
        int count = Integer.parseInt(one(opts, "count", "1"));
        String spec = one(opts, "layout", null);
        if (spec == null) {
            fail("plant: --layout is required");
        }
        if (!opts.containsKey("bookies")) {
            fail("plant: --bookies is required (the layout names ensemble indexes)");
        }
        if (e < 1 || w < 1 || a < 1 || w > e || a > w) {
            fail("plant: want 1 <= ack quorum <= write quorum <= ensemble, got E" + e + " W" + w + " A" + a);
        }
        java.util.TreeMap<Long, Planted> layout = parseLayout(spec, e, w);
        java.util.TreeMap<Long, List<BookieId>> segments = parseEnsembles(one(opts, "ensembles", ""), e);
        byte[] pw = password.getBytes(StandardCharsets.UTF_8);
        // What the normal client sends as the ledger's master key (LedgerHandle's ledgerKey): the bookies
        // compare it on every later add, fencing read and recovery add.
        byte[] masterKey = org.apache.bookkeeper.proto.checksum.DigestManager.generateMasterKey(pw);
        long span = layout.isEmpty() ? 0 : layout.lastKey() + 1;
        for (int i = 0; i < count; i++) {
            WriteHandle wh = bk.newCreateLedgerOp().withEnsembleSize(e).withWriteQuorumSize(w).withAckQuorumSize(a)
                    .withDigestType(digest).withPassword(pw).execute().get(30, TimeUnit.SECONDS);
            long id = wh.getId();
            LedgerMetadata md = segments.isEmpty() ? wh.getLedgerMetadata() : addSegments(bk, id, segments);
            // V3 packaging (useV2Protocol false), as the client sends by default.
            org.apache.bookkeeper.proto.checksum.DigestManager dm =
                    org.apache.bookkeeper.proto.checksum.DigestManager.instantiate(id, pw,
                            org.apache.bookkeeper.client.BookKeeper.DigestType.toProtoDigestType(
                                    org.apache.bookkeeper.client.BookKeeper.DigestType.fromApiDigestType(digest)),
                            io.netty.buffer.UnpooledByteBufAllocator.DEFAULT, false);
            StringBuilder planted = new StringBuilder("{");
            for (Map.Entry<Long, Planted> item : layout.entrySet()) {
                long entry = item.getKey();
                Planted p = item.getValue();
                if (p.indexes.length == 0) {
                    continue;
                }
                List<BookieId> ensemble = md.getEnsembleAt(entry);
                List<BookieId> targets = new ArrayList<>();
                for (int index : p.indexes) {
                    targets.add(ensemble.get(index));
                }
                // The writer's length through entry e: every entry 0..e is `size` bytes.
                long length = (entry + 1) * (long) size;
                io.netty.util.ReferenceCounted toSend = dm.computeDigestAndPackageForSending(entry, p.lac, length,
                        io.netty.buffer.Unpooled.wrappedBuffer(payload(id, entry, size)), masterKey,
                        org.apache.bookkeeper.proto.BookieProtocol.FLAG_NONE);
                List<CompletableFuture<Integer>> acks = new ArrayList<>();
                for (BookieId bookie : targets) {
                    CompletableFuture<Integer> ack = new CompletableFuture<>();
                    acks.add(ack);
                    // addEntry retains the buffer for each bookie; our reference is released below.
                    raw.client.addEntry(bookie, id, masterKey, entry, toSend,
                            (rc, lid, eid, addr, ctx) -> ack.complete(rc), null,
                            org.apache.bookkeeper.proto.BookieProtocol.FLAG_NONE, false,
                            org.apache.bookkeeper.client.api.WriteFlag.NONE);
                }
                toSend.release();
                for (int k = 0; k < targets.size(); k++) {
                    int rc = acks.get(k).get(60, TimeUnit.SECONDS);
                    if (rc != org.apache.bookkeeper.client.BKException.Code.OK) {
                        throw new IllegalStateException("plant: add of entry " + entry + " of ledger " + id
                                + " to bookie " + targets.get(k) + " failed: rc=" + rc + " ("
                                + org.apache.bookkeeper.client.api.BKException.getMessage(rc) + ")");
                    }
                }
                planted.append(planted.length() > 1 ? "," : "").append('"').append(entry).append("\":[");
                for (int k = 0; k < targets.size(); k++) {
                    planted.append(k > 0 ? "," : "").append(str(targets.get(k).toString()));
                }
                planted.append(']');
            }
            planted.append('}');
            String json = describe(id, md, wh.getLastAddConfirmed(), opts, password, (int) span, size);
            emit(json.substring(0, json.length() - 1) + ",\"layout\":" + str(spec) + ",\"planted\":" + planted
                    + "}");
        }
        // The handles are never closed: the ledgers stay OPEN in their metadata.
    }

    /** --layout: entry -> where it goes; fails with one line on anything malformed or outside the ensemble. */
    static java.util.TreeMap<Long, Planted> parseLayout(String spec, int e, int w) {
        java.util.TreeMap<Long, Planted> out = new java.util.TreeMap<>();
        org.apache.bookkeeper.client.RoundRobinDistributionSchedule schedule =
                new org.apache.bookkeeper.client.RoundRobinDistributionSchedule(w, 1, e);
        for (String raw : spec.split(";")) {
            String item = raw.trim();
            if (item.isEmpty()) {
                continue;
            }
            int eq = item.indexOf('=');
            if (eq < 0) {
                fail("--layout item '" + item + "': want ENTRIES=WHERE[@LAC]");
            }
            String entries = item.substring(0, eq).trim();
            String where = item.substring(eq + 1).trim();
            Long lac = null;
            int at = where.indexOf('@');
            if (at >= 0) {
                lac = number(where.substring(at + 1), "--layout item '" + item + "': LAC");
                where = where.substring(0, at).trim();
            }
            int dash = entries.indexOf('-', 1);
            long first = number(dash < 0 ? entries : entries.substring(0, dash), "--layout item '" + item + "': entry");
            long last = dash < 0 ? first : number(entries.substring(dash + 1), "--layout item '" + item + "': entry");
            if (first < 0 || last < first) {
                fail("--layout item '" + item + "': want entries k or a-b with 0 <= a <= b");
            }
            int[] fixed = null;
            if (where.equals("none")) {
                fixed = new int[0];
            } else if (!where.equals("ws")) {
                String[] parts = where.split(",");
                fixed = new int[parts.length];
                Set<Integer> seen = new HashSet<>();
                for (int k = 0; k < parts.length; k++) {
                    long index = number(parts[k], "--layout item '" + item + "': ensemble index");
                    if (index < 0 || index >= e) {
                        fail("--layout item '" + item + "': ensemble index " + index + " outside the ensemble 0.."
                                + (e - 1));
                    }
                    if (!seen.add((int) index)) {
                        fail("--layout item '" + item + "': ensemble index " + index + " twice");
                    }
                    fixed[k] = (int) index;
                }
            }
            for (long entry = first; entry <= last; entry++) {
                long pig = lac != null ? lac : entry - 1;
                if (pig < -1 || pig >= entry) {
                    fail("--layout item '" + item + "': LAC " + pig + " of entry " + entry + " not in -1.."
                            + (entry - 1));
                }
                int[] indexes = fixed;
                if (indexes == null) {
                    DistributionSchedule.WriteSet ws = schedule.getWriteSet(entry);
                    indexes = new int[ws.size()];
                    for (int k = 0; k < ws.size(); k++) {
                        indexes[k] = ws.get(k);
                    }
                    ws.recycle();
                }
                if (out.put(entry, new Planted(indexes, pig)) != null) {
                    fail("--layout item '" + item + "': entry " + entry + " placed twice");
                }
            }
        }
        return out;
    }

    /** --ensembles "K:a,b,c;...": the segments to add, each of E distinct bookies, K > 0 and increasing. */
    static java.util.TreeMap<Long, List<BookieId>> parseEnsembles(String spec, int e) {
        java.util.TreeMap<Long, List<BookieId>> out = new java.util.TreeMap<>();
        for (String raw : spec.split(";")) {
            String item = raw.trim();
            if (item.isEmpty()) {
                continue;
            }
            int colon = item.indexOf(':');
            if (colon < 0) {
                fail("--ensembles item '" + item + "': want FIRSTENTRY:bookie,bookie,...");
            }
            long key = number(item.substring(0, colon), "--ensembles item '" + item + "': first entry");
            if (key <= 0 || (!out.isEmpty() && key <= out.lastKey())) {
                fail("--ensembles item '" + item + "': first entries must be > 0 and increasing");
            }
            List<BookieId> bookies = new ArrayList<>();
            for (String b : item.substring(colon + 1).split(",")) {
                try {
                    bookies.add(BookieId.parse(b.trim()));
                } catch (RuntimeException bad) {
                    fail("--ensembles item '" + item + "': bad bookie id '" + b.trim() + "'");
                }
            }
            if (bookies.size() != e || new HashSet<>(bookies).size() != e) {
                fail("--ensembles item '" + item + "': want " + e + " distinct bookies");
            }
            out.put(key, bookies);
        }
        return out;
    }

    /** Appends segments to an OPEN ledger's metadata as read back (version-checked write; stays OPEN). */
    static LedgerMetadata addSegments(org.apache.bookkeeper.client.BookKeeper bk, long id,
                                      java.util.TreeMap<Long, List<BookieId>> segments) throws Exception {
        org.apache.bookkeeper.versioning.Versioned<LedgerMetadata> current =
                bk.getLedgerManager().readLedgerMetadata(id).get(30, TimeUnit.SECONDS);
        org.apache.bookkeeper.client.LedgerMetadataBuilder b =
                org.apache.bookkeeper.client.LedgerMetadataBuilder.from(current.getValue());
        for (Map.Entry<Long, List<BookieId>> seg : segments.entrySet()) {
            b.newEnsembleEntry(seg.getKey(), seg.getValue());
        }
        return bk.getLedgerManager().writeLedgerMetadata(id, b.build(), current.getVersion())
                .get(30, TimeUnit.SECONDS).getValue();
    }

    static long number(String s, String what) {
        try {
            return Long.parseLong(s.trim());
        } catch (NumberFormatException bad) {
            fail(what + " '" + s.trim() + "' is not a number");
            return 0;
        }
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
                // null for metadata with no password (format v1: ledgerMetadataVersion=1 in --client-conf)
                + ",\"digest\":" + (md.getDigestType() == null ? "null" : str(md.getDigestType().toString()))
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
        throw new Failure(msg);
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
