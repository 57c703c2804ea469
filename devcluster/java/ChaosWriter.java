import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedReader;
import java.io.FileOutputStream;
import java.io.FileReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Enumeration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.SplittableRandom;
import java.util.TreeMap;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.zip.CRC32;
import org.apache.bookkeeper.client.BKException;
import org.apache.bookkeeper.client.BookKeeper;
import org.apache.bookkeeper.client.LedgerEntry;
import org.apache.bookkeeper.client.LedgerHandle;
import org.apache.bookkeeper.client.api.LedgerMetadata;
import org.apache.bookkeeper.conf.ClientConfiguration;

/**
 * Live writers for the repair chaos campaign, on the real Java client (the legacy BookKeeper API, default
 * placement policy, so bookie failures are met with ensemble changes as Pulsar's client meets them).
 *
 * <p>{@code stream}: N writer threads share one client. Each creates a ledger of the next shape, adds
 * entries asynchronously (a few outstanding) at a rate, logs every acknowledgement to the ack log at once
 * (one write(2) per line: a SIGKILL loses nothing already acknowledged and logged), closes after a seeded
 * number of entries and rolls over, keeping only the last {@code retain} closed ledgers (older ones are
 * deleted, as Pulsar trims). An add failure closes what it can, logs an error and rolls over. SIGTERM closes
 * the open ledgers and exits 0; SIGKILL leaves them open on purpose.
 *
 * <p>Ack log lines (JSON): {"ev":"ack","l":L,"e":E,"h":"crc32 hex","n":len}, {"ev":"create","l":L,
 * "shape":"3/2/2","w":thread,"t":ms}, {"ev":"close","l":L,"last":E,"ens":ensembles,"w":thread,"t":ms}, {"ev":"delete","l":L,"t":ms},
 * {"ev":"error","l":L,"msg":"..."}, {"ev":"start","seed":S,"writers":N,"t":ms}.
 *
 * <p>{@code verify}: for every ledger in the ack logs, reads the metadata (GONE when deleted), opens it
 * without recovery (never fences, never closes, never writes), reads every acknowledged entry (unconfirmed
 * reads, since writers may have died) and compares length and CRC32. One JSON line per ledger, then a
 * summary line.
 */
public class ChaosWriter {
    static final ObjectMapper JSON = new ObjectMapper();

    public static void main(String[] argv) throws Exception {
        if (argv.length < 1) {
            System.err.println("usage: ChaosWriter stream|verify --metadata-uri URI [options]");
            System.exit(2);
        }
        Map<String, String> opts = new HashMap<>();
        for (int i = 1; i < argv.length; i++) {
            if (!argv[i].startsWith("--")) {
                System.err.println("unexpected argument " + argv[i]);
                System.exit(2);
            }
            String key = argv[i].substring(2);
            String value = (i + 1 < argv.length && !argv[i + 1].startsWith("--")) ? argv[++i] : "true";
            opts.put(key, value);
        }
        String uri = opts.get("metadata-uri");
        if (uri == null) {
            System.err.println("--metadata-uri is required");
            System.exit(2);
        }
        ClientConfiguration conf = new ClientConfiguration();
        if (opts.containsKey("client-conf")) {
            conf.loadConf(new java.io.File(opts.get("client-conf")).toURI().toURL());
        }
        conf.setMetadataServiceUri(uri);
        conf.setZkTimeout(6000);
        conf.setAddEntryTimeout(Integer.parseInt(opts.getOrDefault("add-timeout", "3")));
        conf.setReadEntryTimeout(3);
        switch (argv[0]) {
            case "stream":
                new Stream(conf, opts).run();
                break;
            case "verify":
                verify(conf, opts);
                break;
            default:
                System.err.println("unknown command " + argv[0]);
                System.exit(2);
        }
    }

    static String crc(byte[] data) {
        CRC32 c = new CRC32();
        c.update(data);
        return String.format("%08x", c.getValue());
    }

    /** The payload of (ledger, entry, seed): `size` bytes from a generator seeded by the three. */
    static byte[] payload(long ledger, long entry, long seed, int size) {
        SplittableRandom r = new SplittableRandom(seed * 0x9E3779B97F4A7C15L ^ ledger * 0xC2B2AE3D27D4EB4FL ^ entry);
        byte[] out = new byte[size];
        for (int i = 0; i < size; i++) {
            out[i] = (byte) r.nextInt(256);
        }
        return out;
    }

    static String q(String s) {
        try {
            return JSON.writeValueAsString(s == null ? "" : s);
        } catch (Exception e) {
            return "\"?\"";
        }
    }

    // ------------------------------------------------------------------ stream
    static final class Stream {
        final ClientConfiguration conf;
        final int writers;
        final long seed;
        final String[] shapes;
        final int sizeMin;
        final int sizeMax;
        final int entriesMin;
        final int entriesMax;
        final double rate;
        final int retain;
        final int outstanding;
        final byte[] password;
        final BookKeeper.DigestType digest;
        final FileOutputStream log;
        final AtomicBoolean stopping = new AtomicBoolean(false);
        final AtomicLong shapeCounter = new AtomicLong();
        final List<Thread> threads = new ArrayList<>();

        Stream(ClientConfiguration conf, Map<String, String> o) throws Exception {
            this.conf = conf;
            writers = Integer.parseInt(o.getOrDefault("writers", "3"));
            seed = Long.parseLong(o.getOrDefault("seed", "1"));
            shapes = o.getOrDefault("shapes", "3/2/2,3/3/2,5/2/2").split(",");
            sizeMin = Integer.parseInt(o.getOrDefault("entry-size-min", "512"));
            sizeMax = Integer.parseInt(o.getOrDefault("entry-size-max", "4096"));
            entriesMin = Integer.parseInt(o.getOrDefault("entries-min", "200"));
            entriesMax = Integer.parseInt(o.getOrDefault("entries-max", "800"));
            rate = Double.parseDouble(o.getOrDefault("rate", "20"));
            retain = Integer.parseInt(o.getOrDefault("retain", "3"));
            outstanding = Integer.parseInt(o.getOrDefault("outstanding", "4"));
            password = o.getOrDefault("password", "pw").getBytes(StandardCharsets.UTF_8);
            digest = BookKeeper.DigestType.valueOf(o.getOrDefault("digest", "CRC32C"));
            String path = o.get("ack-log");
            if (path == null) {
                throw new IllegalArgumentException("--ack-log is required");
            }
            log = new FileOutputStream(path, true);
        }

        /** One line, one write(2), under a lock: lines never interleave, nothing is buffered in-process. */
        void emit(String line) {
            byte[] b = (line + "\n").getBytes(StandardCharsets.UTF_8);
            synchronized (log) {
                try {
                    log.write(b);
                } catch (Exception e) {
                    System.err.println("ack log write failed: " + e);
                }
            }
        }

        void run() throws Exception {
            BookKeeper bk = new BookKeeper(conf);
            emit("{\"ev\":\"start\",\"seed\":" + seed + ",\"writers\":" + writers + ",\"t\":"
                    + System.currentTimeMillis() + "}");
            for (int i = 0; i < writers; i++) {
                final int idx = i;
                Thread t = new Thread(() -> writerLoop(bk, idx), "chaos-writer-" + i);
                threads.add(t);
                t.start();
            }
            Runtime.getRuntime().addShutdownHook(new Thread(() -> {
                stopping.set(true);
                for (Thread t : threads) {
                    try {
                        t.join(20000);
                    } catch (InterruptedException e) {
                        break;
                    }
                }
                try {
                    bk.close();
                } catch (Exception e) {
                    // exiting anyway
                }
                emit("{\"ev\":\"stop\",\"t\":" + System.currentTimeMillis() + "}");
                Runtime.getRuntime().halt(0);
            }, "chaos-writer-stop"));
            for (Thread t : threads) {
                t.join();
            }
        }

        void sleepMs(long ms) {
            try {
                Thread.sleep(ms);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }

        void writerLoop(BookKeeper bk, int idx) {
            Random rng = new Random(seed * 1000003L + idx);
            ArrayDeque<Long> closed = new ArrayDeque<>();
            long periodNanos = (long) (1e9 / Math.max(rate, 0.001));
            while (!stopping.get()) {
                String shape = shapes[(int) (shapeCounter.getAndIncrement() % shapes.length)];
                String[] p = shape.split("/");
                int entries = entriesMin + rng.nextInt(Math.max(1, entriesMax - entriesMin + 1));
                LedgerHandle lh;
                try {
                    lh = bk.createLedger(Integer.parseInt(p[0]), Integer.parseInt(p[1]), Integer.parseInt(p[2]),
                            digest, password);
                } catch (Exception e) {
                    emit("{\"ev\":\"error\",\"l\":-1,\"op\":\"create\",\"shape\":\"" + shape + "\",\"msg\":"
                            + q(e.toString()) + "}");
                    sleepMs(1000);
                    continue;
                }
                long lid = lh.getId();
                emit("{\"ev\":\"create\",\"l\":" + lid + ",\"shape\":\"" + shape + "\",\"w\":" + idx + ",\"t\":"
                        + System.currentTimeMillis() + "}");
                Semaphore window = new Semaphore(outstanding);
                AtomicBoolean failed = new AtomicBoolean(false);
                long next = System.nanoTime();
                for (long e = 0; e < entries && !stopping.get() && !failed.get(); e++) {
                    long wait = next - System.nanoTime();
                    if (wait > 0) {
                        sleepMs(wait / 1_000_000L);
                    }
                    next += periodNanos;
                    int size = sizeMin + rng.nextInt(Math.max(1, sizeMax - sizeMin + 1));
                    byte[] data = payload(lid, e, seed, size);
                    String hash = crc(data);
                    try {
                        while (!window.tryAcquire(200, TimeUnit.MILLISECONDS)) {
                            if (failed.get()) {
                                break;
                            }
                        }
                    } catch (InterruptedException ie) {
                        break;
                    }
                    if (failed.get()) {
                        break;
                    }
                    final long expected = e;
                    lh.asyncAddEntry(data, (rc, h, entryId, ctx) -> {
                        if (rc == BKException.Code.OK) {
                            if (entryId != expected) {
                                emit("{\"ev\":\"error\",\"l\":" + lid + ",\"msg\":\"entry id " + entryId
                                        + " for add " + expected + "\"}");
                            }
                            emit("{\"ev\":\"ack\",\"l\":" + lid + ",\"e\":" + entryId + ",\"h\":\"" + hash
                                    + "\",\"n\":" + size + "}");
                        } else if (failed.compareAndSet(false, true)) {
                            emit("{\"ev\":\"error\",\"l\":" + lid + ",\"e\":" + expected + ",\"op\":\"add\",\"rc\":"
                                    + rc + ",\"msg\":" + q(BKException.getMessage(rc)) + "}");
                        }
                        window.release();
                    }, null);
                }
                // Let the outstanding adds finish (acknowledged or failed) before closing.
                try {
                    if (!window.tryAcquire(outstanding, 30, TimeUnit.SECONDS)) {
                        emit("{\"ev\":\"error\",\"l\":" + lid + ",\"msg\":\"adds still outstanding after 30 s\"}");
                    }
                } catch (InterruptedException ie) {
                    // close anyway
                }
                try {
                    lh.close();
                    emit("{\"ev\":\"close\",\"l\":" + lid + ",\"last\":" + lh.getLastAddConfirmed() + ",\"ens\":"
                            + lh.getLedgerMetadata().getAllEnsembles().size() + ",\"w\":" + idx
                            + ",\"t\":" + System.currentTimeMillis() + "}");
                    closed.addLast(lid);
                } catch (Exception ex) {
                    emit("{\"ev\":\"error\",\"l\":" + lid + ",\"op\":\"close\",\"msg\":" + q(ex.toString()) + "}");
                }
                while (closed.size() > retain && !stopping.get()) {
                    long old = closed.removeFirst();
                    try {
                        bk.deleteLedger(old);
                        emit("{\"ev\":\"delete\",\"l\":" + old + ",\"t\":" + System.currentTimeMillis() + "}");
                    } catch (Exception ex) {
                        emit("{\"ev\":\"error\",\"l\":" + old + ",\"op\":\"delete\",\"msg\":" + q(ex.toString())
                                + "}");
                    }
                }
                if (failed.get()) {
                    sleepMs(500);
                }
            }
        }
    }

    // ------------------------------------------------------------------ verify
    static final class Expect {
        final String hash;
        final int len;

        Expect(String hash, int len) {
            this.hash = hash;
            this.len = len;
        }
    }

    static void verify(ClientConfiguration conf, Map<String, String> opts) throws Exception {
        long started = System.currentTimeMillis();
        long jvmStartup = started - java.lang.management.ManagementFactory.getRuntimeMXBean().getStartTime();
        byte[] password = opts.getOrDefault("password", "pw").getBytes(StandardCharsets.UTF_8);
        BookKeeper.DigestType digest = BookKeeper.DigestType.valueOf(opts.getOrDefault("digest", "CRC32C"));
        TreeMap<Long, TreeMap<Long, Expect>> acked = new TreeMap<>();
        for (String path : opts.getOrDefault("ack-log", "").split(",")) {
            if (path.isEmpty()) {
                continue;
            }
            try (BufferedReader r = new BufferedReader(new FileReader(path, StandardCharsets.UTF_8))) {
                String line;
                while ((line = r.readLine()) != null) {
                    JsonNode n;
                    try {
                        n = JSON.readTree(line);
                    } catch (Exception e) {
                        continue; // a torn last line of a killed writer
                    }
                    if (n == null || !n.has("ev") || !n.has("l")) {
                        continue;
                    }
                    long lid = n.get("l").asLong();
                    String ev = n.get("ev").asText();
                    if (ev.equals("create")) {
                        acked.computeIfAbsent(lid, k -> new TreeMap<>());
                    } else if (ev.equals("ack")) {
                        acked.computeIfAbsent(lid, k -> new TreeMap<>())
                                .put(n.get("e").asLong(), new Expect(n.get("h").asText(), n.get("n").asInt()));
                    }
                }
            }
        }
        long ledgers = 0, gone = 0, ackedTotal = 0, verifiedTotal = 0, missingTotal = 0, changedTotal = 0;
        long closedShortTotal = 0, open = 0;
        try (BookKeeper bk = new BookKeeper(conf)) {
            for (Map.Entry<Long, TreeMap<Long, Expect>> le : acked.entrySet()) {
                long lid = le.getKey();
                TreeMap<Long, Expect> want = le.getValue();
                ledgers++;
                ackedTotal += want.size();
                long ackedMax = want.isEmpty() ? -1 : want.lastKey();
                LedgerMetadata md;
                try {
                    md = bk.getLedgerManager().readLedgerMetadata(lid).get(30, TimeUnit.SECONDS).getValue();
                } catch (Exception e) {
                    Throwable c = e.getCause() != null ? e.getCause() : e;
                    int code = c instanceof BKException ? ((BKException) c).getCode() : 0;
                    if (code == BKException.Code.NoSuchLedgerExistsOnMetadataServerException
                            || code == BKException.Code.NoSuchLedgerExistsException) {
                        gone++;
                        System.out.println("{\"ledgerId\":" + lid + ",\"state\":\"GONE\",\"ackedMax\":" + ackedMax
                                + ",\"acked\":" + want.size() + ",\"verified\":0,\"missing\":[],\"changed\":[]"
                                + ",\"closedShort\":false}");
                        continue;
                    }
                    missingTotal += want.size();
                    System.out.println("{\"ledgerId\":" + lid + ",\"state\":\"UNKNOWN\",\"ackedMax\":" + ackedMax
                            + ",\"acked\":" + want.size() + ",\"verified\":0,\"missing\":" + ids(want.keySet())
                            + ",\"missingCount\":" + want.size() + ",\"changed\":[],\"closedShort\":false"
                            + ",\"metadataError\":" + q(c.toString()) + "}");
                    continue;
                }
                String state = md.getState().name();
                if (state.equals("OPEN")) {
                    open++;
                }
                long last = md.isClosed() ? md.getLastEntryId() : -1;
                boolean closedShort = md.isClosed() && last < ackedMax;
                if (closedShort) {
                    closedShortTotal++;
                }
                List<Long> missing = new ArrayList<>();
                List<Long> changed = new ArrayList<>();
                Map<String, Integer> errors = new TreeMap<>();
                long verified = 0;
                LedgerHandle lh = null;
                try {
                    lh = bk.openLedgerNoRecovery(lid, digest, password);
                } catch (Exception e) {
                    errors.merge("open:" + (e instanceof BKException ? ((BKException) e).getCode() : 0), 1,
                            Integer::sum);
                    missing.addAll(want.keySet());
                }
                if (lh != null) {
                    List<Long> ids = new ArrayList<>(want.keySet());
                    // Contiguous runs of up to 64 acknowledged entries, read asynchronously, 16 reads in flight;
                    // whatever a batch did not return is read alone below, for its error code.
                    Map<Long, byte[]> got = new java.util.concurrent.ConcurrentHashMap<>();
                    Semaphore window = new Semaphore(16);
                    java.util.concurrent.CountDownLatch done = new java.util.concurrent.CountDownLatch(
                            (ids.size() + 63) / 64);
                    for (int i = 0; i < ids.size(); i += 64) {
                        long first = ids.get(i), lastId = ids.get(Math.min(ids.size(), i + 64) - 1);
                        boolean contiguous = lastId - first + 1 == Math.min(ids.size(), i + 64) - i;
                        if (!contiguous || (md.isClosed() && lastId > last)) {
                            done.countDown();
                            continue;
                        }
                        window.acquire();
                        lh.asyncReadUnconfirmedEntries(first, lastId, (rc, h, seq, ctx) -> {
                            if (rc == BKException.Code.OK && seq != null) {
                                while (seq.hasMoreElements()) {
                                    LedgerEntry ent = seq.nextElement();
                                    got.put(ent.getEntryId(), ent.getEntry());
                                }
                            }
                            window.release();
                            done.countDown();
                        }, null);
                    }
                    if (!done.await(300, TimeUnit.SECONDS)) {
                        errors.merge("batchTimeout", 1, Integer::sum);
                    }
                    for (long id : ids) {
                        byte[] data = got.get(id);
                        if (data == null) {
                            try {
                                Enumeration<LedgerEntry> en = lh.readUnconfirmedEntries(id, id);
                                data = en.nextElement().getEntry();
                            } catch (BKException e) {
                                errors.merge(String.valueOf(e.getCode()), 1, Integer::sum);
                            } catch (Exception e) {
                                errors.merge(e.getClass().getSimpleName(), 1, Integer::sum);
                            }
                        }
                        if (data == null) {
                            missing.add(id);
                            continue;
                        }
                        Expect x = want.get(id);
                        if (data.length != x.len || !crc(data).equals(x.hash)) {
                            changed.add(id);
                        } else {
                            verified++;
                        }
                    }
                    try {
                        lh.close(); // a read-only handle: unregisters its listener, writes nothing
                    } catch (Exception e) {
                        // nothing to undo
                    }
                }
                verifiedTotal += verified;
                missingTotal += missing.size();
                changedTotal += changed.size();
                StringBuilder err = new StringBuilder("{");
                for (Map.Entry<String, Integer> x : errors.entrySet()) {
                    err.append(err.length() > 1 ? "," : "").append(q(x.getKey())).append(':').append(x.getValue());
                }
                err.append('}');
                System.out.println("{\"ledgerId\":" + lid + ",\"state\":\"" + state + "\",\"lastEntryId\":"
                        + md.getLastEntryId() + ",\"ackedMax\":" + ackedMax + ",\"acked\":" + want.size()
                        + ",\"verified\":" + verified + ",\"missing\":" + ids(missing) + ",\"missingCount\":"
                        + missing.size() + ",\"changed\":" + ids(changed) + ",\"changedCount\":" + changed.size()
                        + ",\"errors\":" + err + ",\"closedShort\":" + closedShort + ",\"ensembles\":"
                        + md.getAllEnsembles().size() + "}");
            }
        }
        System.out.println("{\"summary\":true,\"ledgers\":" + ledgers + ",\"gone\":" + gone + ",\"open\":" + open
                + ",\"acked\":" + ackedTotal + ",\"verified\":" + verifiedTotal + ",\"missing\":" + missingTotal
                + ",\"changed\":" + changedTotal + ",\"closedShort\":" + closedShortTotal + ",\"jvmStartupMs\":"
                + jvmStartup + ",\"verifyMs\":" + (System.currentTimeMillis() - started) + "}");
    }

    static String ids(java.util.Collection<Long> all) {
        StringBuilder b = new StringBuilder("[");
        int n = 0;
        for (long id : all) {
            if (n++ == 20) {
                break;
            }
            b.append(n > 1 ? "," : "").append(id);
        }
        return b.append(']').toString();
    }
}
