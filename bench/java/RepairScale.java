import io.netty.buffer.ByteBuf;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.EnumSet;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.bookkeeper.client.BKException;
import org.apache.bookkeeper.client.BKException.BKNotEnoughBookiesException;
import org.apache.bookkeeper.client.BookKeeper;
import org.apache.bookkeeper.client.EnsemblePlacementPolicy.PlacementResult;
import org.apache.bookkeeper.client.RoundRobinDistributionSchedule;
import org.apache.bookkeeper.client.api.DigestType;
import org.apache.bookkeeper.client.api.LedgerMetadata;
import org.apache.bookkeeper.client.api.WriteFlag;
import org.apache.bookkeeper.client.api.WriteHandle;
import org.apache.bookkeeper.conf.ClientConfiguration;
import org.apache.bookkeeper.net.BookieId;
import org.apache.bookkeeper.proto.BookieClient;
import org.apache.bookkeeper.proto.BookieClientImpl;
import org.apache.bookkeeper.proto.BookieProtocol;
import org.apache.bookkeeper.proto.checksum.DigestManager;
import org.apache.bookkeeper.util.ByteBufList;

/**
 * The Java halves of bench/repair_scale.py (a lost bookie at scale), on the real 4.17 client.
 *
 *   floor --metadata-uri URI --victim ID --ledgers-file F [--password P] [--in-flight N]
 *       The floor of a lost bookie's repair: prints READY, waits for a line on stdin, then reads the
 *       metadata of the ledgers in F (one id a line), and for every entry whose write set named the
 *       victim reads the stored entry (as the bookie returns it: header, digest, payload) from one
 *       surviving member of that write set and sends it unchanged as a RECOVERY_ADD to a bookie outside
 *       the segment's ensemble (round robin over the candidates), N entries in flight over all ledgers.
 *       No digest check, no lock, no marker, no metadata write (the ensembles still name the victim).
 *       Ledgers with write quorum 2 go first. Prints one JSON line: seconds, copies, bytes, errors,
 *       and when the metadata was read and the last write-quorum-2 ledger was done.
 *   load --metadata-uri URI --exclude ID[,ID] [--rate R] [--entry-size B] [--roll N]
 *       A light writer: R adds a second (1 in flight per tick, never more than 64 outstanding) of B bytes
 *       to E3/WQ2/AQ2 ledgers placed away from the excluded bookies, a new ledger every N entries. Each
 *       line "MARK" on stdin prints the adds acknowledged since the last mark and their latency
 *       (client side, ms: mean, p50, p99, p999, max); "STOP" (or end of input) ends it.
 */
public class RepairScale {

    static final String PROP_EXCLUDE = "repairscale.exclude";

    public static void main(String[] argv) throws Exception {
        Map<String, String> opts = new HashMap<>();
        for (int i = 1; i + 1 < argv.length; i += 2) {
            opts.put(argv[i].replaceFirst("^--", ""), argv[i + 1]);
        }
        int rc = 0;
        try {
            switch (argv[0]) {
                case "floor":
                    floor(opts);
                    break;
                case "load":
                    load(opts);
                    break;
                default:
                    throw new IllegalArgumentException("unknown command " + argv[0]);
            }
        } catch (Exception e) {
            System.out.println("{\"error\":\"" + e.toString().replace("\\", "/").replace("\"", "'") + "\"}");
            System.out.flush();
            rc = 3;
        }
        Runtime.getRuntime().halt(rc);
    }

    static ClientConfiguration conf(Map<String, String> opts) {
        ClientConfiguration conf = new ClientConfiguration();
        conf.setMetadataServiceUri(opts.get("metadata-uri"));
        conf.setZkTimeout(6000);
        conf.setAddEntryTimeout(30);
        conf.setReadEntryTimeout(30);
        return conf;
    }

    /** One copy: entry `entry` of ledger `ledger`, read from `source`, added to `target`. */
    static final class Copy {
        final long ledger;
        final long entry;
        final BookieId source;
        final BookieId target;

        Copy(long ledger, long entry, BookieId source, BookieId target) {
            this.ledger = ledger;
            this.entry = entry;
            this.source = source;
            this.target = target;
        }
    }

    static void floor(Map<String, String> opts) throws Exception {
        BookieId victim = BookieId.parse(opts.get("victim"));
        byte[] masterKey = DigestManager.generateMasterKey(opts.getOrDefault("password", "pw")
                .getBytes(StandardCharsets.UTF_8));
        int inFlight = Integer.parseInt(opts.getOrDefault("in-flight", "256"));
        List<Long> ids = new ArrayList<>();
        for (String line : Files.readAllLines(Paths.get(opts.get("ledgers-file")))) {
            if (!line.isBlank()) {
                ids.add(Long.parseLong(line.trim()));
            }
        }
        ClientConfiguration conf = conf(opts);
        BookKeeper bk = new BookKeeper(conf);
        io.netty.channel.EventLoopGroup group = new io.netty.channel.nio.NioEventLoopGroup(2);
        org.apache.bookkeeper.common.util.OrderedExecutor executor =
                org.apache.bookkeeper.common.util.OrderedExecutor.newBuilder().numThreads(2).name("floor").build();
        java.util.concurrent.ScheduledExecutorService scheduler =
                java.util.concurrent.Executors.newSingleThreadScheduledExecutor();
        BookieClient client = new BookieClientImpl(conf, group, io.netty.buffer.UnpooledByteBufAllocator.DEFAULT,
                executor, scheduler, org.apache.bookkeeper.stats.NullStatsLogger.INSTANCE,
                bk.getBookieAddressResolver());
        // Connected before the clock, as a long-running worker is: one read of a ledger nobody has from
        // every bookie but the victim (answered NoSuchLedger), which opens the connections.
        List<CompletableFuture<Integer>> warm = new ArrayList<>();
        for (String b : opts.get("bookies").split(",")) {
            BookieId id = BookieId.parse(b);
            if (!id.equals(victim)) {
                CompletableFuture<Integer> f = new CompletableFuture<>();
                warm.add(f);
                client.readEntry(id, Long.MAX_VALUE / 2, 0, (rc, l, e, buf, ctx) -> f.complete(rc), null,
                        BookieProtocol.FLAG_NONE);
            }
        }
        for (CompletableFuture<Integer> f : warm) {
            f.get(60, TimeUnit.SECONDS);
        }
        System.out.println("READY");
        System.out.flush();
        new BufferedReader(new InputStreamReader(System.in)).readLine();
        long t0 = System.nanoTime();

        // Metadata: every ledger's, all requests in flight at once.
        List<CompletableFuture<LedgerMetadata>> mds = new ArrayList<>();
        for (long id : ids) {
            mds.add(bk.getLedgerManager().readLedgerMetadata(id).thenApply(v -> v.getValue()));
        }
        List<Copy> first = new ArrayList<>();
        List<Copy> later = new ArrayList<>();
        Map<Long, AtomicInteger> left = new HashMap<>();
        Set<Long> wq2 = new HashSet<>();
        Map<Set<BookieId>, Integer> turn = new HashMap<>();
        List<BookieId> survivors = new ArrayList<>();
        for (int i = 0; i < ids.size(); i++) {
            long id = ids.get(i);
            LedgerMetadata md = mds.get(i).get(60, TimeUnit.SECONDS);
            RoundRobinDistributionSchedule schedule = new RoundRobinDistributionSchedule(
                    md.getWriteQuorumSize(), md.getAckQuorumSize(), md.getEnsembleSize());
            List<Map.Entry<Long, ? extends List<BookieId>>> segments = new ArrayList<>(md.getAllEnsembles().entrySet());
            int n = 0;
            for (int s = 0; s < segments.size(); s++) {
                List<BookieId> ensemble = segments.get(s).getValue();
                int index = ensemble.indexOf(victim);
                if (index < 0) {
                    continue;
                }
                long start = segments.get(s).getKey();
                long end = s + 1 < segments.size() ? segments.get(s + 1).getKey() - 1 : md.getLastEntryId();
                // Targets: the bookies outside this ensemble, round robin per candidate set.
                if (survivors.isEmpty()) {
                    for (String b : opts.get("bookies").split(",")) {
                        survivors.add(BookieId.parse(b));
                    }
                    survivors.remove(victim);
                }
                List<BookieId> candidates = new ArrayList<>(survivors);
                candidates.removeAll(ensemble);
                Set<BookieId> key = new HashSet<>(candidates);
                int k = turn.merge(key, 1, Integer::sum);
                BookieId target = candidates.get(k % candidates.size());
                for (long e = start; e <= end; e++) {
                    org.apache.bookkeeper.client.DistributionSchedule.WriteSet ws = schedule.getWriteSet(e);
                    if (ws.contains(index)) {
                        BookieId source = null;
                        for (int j = 0; j < ws.size(); j++) {
                            int other = ws.get((int) ((e + j) % ws.size()));
                            if (other != index) {
                                source = ensemble.get(other);
                                break;
                            }
                        }
                        (md.getWriteQuorumSize() == 2 ? first : later).add(new Copy(id, e, source, target));
                        n++;
                    }
                    ws.recycle();
                }
            }
            if (n > 0) {
                left.put(id, new AtomicInteger(n));
                if (md.getWriteQuorumSize() == 2) {
                    wq2.add(id);
                }
            }
        }
        double metadataSeconds = (System.nanoTime() - t0) / 1e9;
        AtomicInteger wq2Left = new AtomicInteger(wq2.size());
        AtomicLong wq2DoneNanos = new AtomicLong(wq2.isEmpty() ? System.nanoTime() : 0);
        AtomicLong bytes = new AtomicLong();
        AtomicLong firstRead = new AtomicLong();
        AtomicLong firstAdd = new AtomicLong();
        AtomicLong done = new AtomicLong();
        ConcurrentLinkedQueue<String> errors = new ConcurrentLinkedQueue<>();
        Semaphore window = new Semaphore(inFlight);
        List<Copy> all = new ArrayList<>(first);
        all.addAll(later);
        for (Copy c : all) {
            window.acquire();
            client.readEntry(c.source, c.ledger, c.entry, (rc, lid, eid, buf, ctx) -> {
                if (rc != BKException.Code.OK) {
                    errors.add("read " + lid + "/" + eid + " from " + c.source + ": rc=" + rc);
                    window.release();
                    return;
                }
                firstRead.compareAndSet(0, System.nanoTime());
                buf.retain();
                bytes.addAndGet(buf.readableBytes());
                ByteBufList toSend = ByteBufList.get(buf);
                client.addEntry(c.target, lid, masterKey, eid, toSend, (arc, alid, aeid, addr, actx) -> {
                    if (arc != BKException.Code.OK) {
                        errors.add("add " + alid + "/" + aeid + " to " + addr + ": rc=" + arc);
                    } else {
                        firstAdd.compareAndSet(0, System.nanoTime());
                        done.incrementAndGet();
                        if (left.get(alid).decrementAndGet() == 0 && wq2.contains(alid)
                                && wq2Left.decrementAndGet() == 0) {
                            wq2DoneNanos.set(System.nanoTime());
                        }
                    }
                    window.release();
                }, null, BookieProtocol.FLAG_RECOVERY_ADD, false, WriteFlag.NONE);
                toSend.release();
            }, null, BookieProtocol.FLAG_NONE);
        }
        window.acquire(inFlight);
        double seconds = (System.nanoTime() - t0) / 1e9;
        List<String> firstErrors = new ArrayList<>(errors);
        System.out.println("{\"seconds\":" + seconds + ",\"metadata_seconds\":" + metadataSeconds
                + ",\"first_read_seconds\":" + (firstRead.get() - t0) / 1e9
                + ",\"first_add_seconds\":" + (firstAdd.get() - t0) / 1e9
                + ",\"wq2_done_seconds\":" + (wq2DoneNanos.get() == 0 ? "null" : (wq2DoneNanos.get() - t0) / 1e9)
                + ",\"ledgers\":" + left.size() + ",\"copies\":" + all.size() + ",\"added\":" + done.get()
                + ",\"bytes\":" + bytes.get() + ",\"errors\":" + errors.size() + ",\"first_errors\":\""
                + String.join("; ", firstErrors.subList(0, Math.min(3, firstErrors.size()))).replace("\"", "'")
                + "\"}");
        System.out.flush();
    }

    /** The client's default placement (rack-aware), minus the bookies in system property repairscale.exclude. */
    public static class ExcludingPolicy extends org.apache.bookkeeper.client.RackawareEnsemblePlacementPolicy {
        static Set<BookieId> excluded() {
            Set<BookieId> out = new HashSet<>();
            for (String s : System.getProperty(PROP_EXCLUDE, "").split(",")) {
                if (!s.isBlank()) {
                    out.add(BookieId.parse(s.trim()));
                }
            }
            return out;
        }

        @Override
        public PlacementResult<List<BookieId>> newEnsemble(int ensembleSize, int quorumSize, int ackQuorumSize,
                Map<String, byte[]> customMetadata, Set<BookieId> excludeBookies) throws BKNotEnoughBookiesException {
            Set<BookieId> ex = new HashSet<>(excludeBookies);
            ex.addAll(excluded());
            return super.newEnsemble(ensembleSize, quorumSize, ackQuorumSize, customMetadata, ex);
        }

        @Override
        public PlacementResult<BookieId> replaceBookie(int ensembleSize, int writeQuorumSize, int ackQuorumSize,
                Map<String, byte[]> customMetadata, List<BookieId> currentEnsemble, BookieId bookieToReplace,
                Set<BookieId> excludeBookies) throws BKNotEnoughBookiesException {
            Set<BookieId> ex = new HashSet<>(excludeBookies);
            ex.addAll(excluded());
            return super.replaceBookie(ensembleSize, writeQuorumSize, ackQuorumSize, customMetadata, currentEnsemble,
                    bookieToReplace, ex);
        }
    }

    static void load(Map<String, String> opts) throws Exception {
        System.setProperty(PROP_EXCLUDE, opts.getOrDefault("exclude", ""));
        double rate = Double.parseDouble(opts.getOrDefault("rate", "100"));
        int size = Integer.parseInt(opts.getOrDefault("entry-size", "1024"));
        int roll = Integer.parseInt(opts.getOrDefault("roll", "5000"));
        ClientConfiguration conf = conf(opts);
        conf.setEnsemblePlacementPolicy(ExcludingPolicy.class);
        byte[] data = new byte[size];
        Arrays.fill(data, (byte) 'x');
        ConcurrentLinkedQueue<Long> latencies = new ConcurrentLinkedQueue<>();
        AtomicLong errors = new AtomicLong();
        AtomicInteger outstanding = new AtomicInteger();
        Thread writer;
        try (org.apache.bookkeeper.client.api.BookKeeper bk =
                     org.apache.bookkeeper.client.api.BookKeeper.newBuilder(conf).build()) {
            final java.util.concurrent.atomic.AtomicBoolean stop = new java.util.concurrent.atomic.AtomicBoolean();
            writer = new Thread(() -> {
                try {
                    long period = (long) (1e9 / rate);
                    long next = System.nanoTime();
                    WriteHandle wh = null;
                    int written = 0;
                    while (!stop.get()) {
                        if (wh == null || written >= roll) {
                            if (wh != null) {
                                wh.closeAsync();
                            }
                            wh = bk.newCreateLedgerOp().withEnsembleSize(3).withWriteQuorumSize(2)
                                    .withAckQuorumSize(2).withDigestType(DigestType.CRC32C)
                                    .withPassword("load".getBytes(StandardCharsets.UTF_8))
                                    .execute().get(30, TimeUnit.SECONDS);
                            written = 0;
                        }
                        long now = System.nanoTime();
                        if (now < next) {
                            Thread.sleep((next - now) / 1_000_000, (int) ((next - now) % 1_000_000));
                        }
                        next += period;
                        if (outstanding.get() >= 64) {
                            continue;
                        }
                        outstanding.incrementAndGet();
                        long sent = System.nanoTime();
                        wh.appendAsync(data).whenComplete((v, ex) -> {
                            outstanding.decrementAndGet();
                            if (ex != null) {
                                errors.incrementAndGet();
                            } else {
                                latencies.add(System.nanoTime() - sent);
                            }
                        });
                        written++;
                    }
                    if (wh != null) {
                        wh.close();
                    }
                } catch (Exception e) {
                    System.out.println("{\"error\":\"" + e.toString().replace("\"", "'") + "\"}");
                    System.out.flush();
                }
            });
            writer.start();
            System.out.println("READY");
            System.out.flush();
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
            String line;
            while ((line = in.readLine()) != null && !line.trim().equals("STOP")) {
                if (line.trim().equals("MARK")) {
                    List<Long> got = new ArrayList<>();
                    Long x;
                    while ((x = latencies.poll()) != null) {
                        got.add(x);
                    }
                    long[] v = got.stream().mapToLong(Long::longValue).sorted().toArray();
                    double mean = v.length == 0 ? 0 : Arrays.stream(v).average().getAsDouble() / 1e6;
                    System.out.println("{\"adds\":" + v.length + ",\"errors\":" + errors.getAndSet(0)
                            + ",\"mean_ms\":" + mean + ",\"p50_ms\":" + pct(v, 0.50) + ",\"p99_ms\":" + pct(v, 0.99)
                            + ",\"p999_ms\":" + pct(v, 0.999) + ",\"max_ms\":" + pct(v, 1.0) + "}");
                    System.out.flush();
                }
            }
            stop.set(true);
            writer.join(10_000);
        }
    }

    static double pct(long[] sorted, double q) {
        if (sorted.length == 0) {
            return 0;
        }
        int i = (int) Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1);
        return sorted[Math.max(0, i)] / 1e6;
    }
}
