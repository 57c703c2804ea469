import com.fasterxml.jackson.databind.ObjectMapper;
import io.netty.buffer.Unpooled;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;
import java.util.UUID;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.bookkeeper.client.BKException;
import org.apache.bookkeeper.client.BookKeeper;
import org.apache.bookkeeper.client.api.LastConfirmedAndEntry;
import org.apache.bookkeeper.client.api.LedgerEntries;
import org.apache.bookkeeper.client.api.LedgerEntry;
import org.apache.bookkeeper.client.api.LedgerMetadata;
import org.apache.bookkeeper.client.api.ReadHandle;
import org.apache.bookkeeper.client.impl.LedgerEntriesImpl;
import org.apache.bookkeeper.client.impl.LedgerEntryImpl;
import org.apache.bookkeeper.conf.ClientConfiguration;
import org.apache.bookkeeper.mledger.Entry;
import org.apache.bookkeeper.mledger.LedgerOffloader;
import org.apache.bookkeeper.mledger.ManagedCursor;
import org.apache.bookkeeper.mledger.ManagedLedger;
import org.apache.bookkeeper.mledger.ManagedLedgerConfig;
import org.apache.bookkeeper.mledger.ManagedLedgerFactoryConfig;
import org.apache.bookkeeper.mledger.Position;
import org.apache.bookkeeper.mledger.PositionFactory;
import org.apache.bookkeeper.mledger.impl.ManagedLedgerFactoryImpl;
import org.apache.bookkeeper.mledger.impl.MetaStoreImpl;
import org.apache.bookkeeper.mledger.proto.MLDataFormats;
import org.apache.pulsar.common.policies.data.OffloadPolicies;
import org.apache.pulsar.common.policies.data.OffloadPoliciesImpl;
import org.apache.pulsar.metadata.api.GetResult;
import org.apache.pulsar.metadata.api.MetadataStoreConfig;
import org.apache.pulsar.metadata.api.extended.MetadataStoreExtended;

/**
 * bk-auditor's test managed-ledger tool: drives Pulsar's own managed-ledger library (the code a broker
 * runs for a topic's storage) against the test cluster, and prints exactly one JSON line on stdout at the
 * end ({"error": "..."} and a non-zero exit status on failure). Logs go to stderr.
 *
 * Common options:
 *   --zk HOST:PORT[/CHROOT]   the Pulsar metadata store (ZooKeeper); managed ledgers live under
 *                             /managed-ledgers there
 *   --metadata-uri URI        BookKeeper's metadata service (default zk+hierarchical://HOST:PORT/ledgers)
 *   --client-conf FILE        extra BookKeeper client keys (e.g. TLS to the bookies)
 *   --ensemble E --write-quorum W --ack-quorum A
 *                             data and cursor ledgers' replication (default 2/2/2)
 *   --compression NONE|ZLIB|LZ4|ZSTD|SNAPPY
 *                             Pulsar's metadata compression of the ML and cursor znodes, threshold 0 so
 *                             every non-empty znode gets the compression wrapper (default NONE)
 *   --offload-dir DIR         install this tool's directory offloader (see DirOffloader), deletion lag 0
 *   --name TENANT/NS/persistent/TOPIC    the managed ledger (every command)
 *
 * Commands:
 *   create  --ledgers N --entries K [--entry-size B] [--cursors a,b] [--leave-open]
 *           open (create) the ML with K entries per ledger and minimum rollover time 0, open the cursors,
 *           write N*K entries (the library rolls after each K), mark-delete each cursor at the first
 *           written entry (so the cursor gets its own cursor ledger), close. A clean close stores each
 *           cursor's position in its znode with cursor ledger -1 and deletes the cursor ledger; with
 *           --leave-open the tool exits without closing anything, as a broker that crashed (or still
 *           owns the topic) would: the current ledger stays open and the cursor znodes name their
 *           cursor ledgers
 *   trim    --through-ledger L
 *           open with retention 0, mark-delete every cursor at the last entry of ledger L (cursors already
 *           further stay), trim consumed ledgers, wait until the trimmed ledgers are gone from BookKeeper
 *   delete  open the ML and delete it (ml.delete(): cursors, ledgers, then the znode)
 *   offload --ledgers N --offload-dir DIR
 *           offload the first N closed ledgers into DIR, then trim so that the library marks them
 *           bookkeeperDeleted (deletion lag 0) and deletes their BookKeeper copies; waits for both
 *   read    [--max M]  read up to M entries (default 10000) from the start through the library (BookKeeper
 *           or the offloaded copy) with a non-durable cursor, and check each payload
 *   info    the ML and cursor znodes as the library parses them (nothing opened, nothing changed)
 *
 * Every command's JSON holds the ML as stored after the command ("ledgers", "cursors", "properties",
 * "terminatedPosition", "znode"; see describe()), plus its own keys. Entry payloads are the unit
 * "E<sequence>-" repeated and cut to the entry size.
 *
 * Opening an existing ML is what a broker does on topic load: the library recovers the last ledger,
 * drops it from the list if it is empty and creates a new current ledger, so every command but info
 * changes the ledger list.
 */
public class MlTool {

    static final ObjectMapper JSON = new ObjectMapper();
    static final int TIMEOUT = 60;
    static final ExecutorService CALLS = Executors.newCachedThreadPool(r -> {
        Thread t = new Thread(r, "mltool-call");
        t.setDaemon(true);
        return t;
    });

    final Map<String, List<String>> opts;
    final String name;
    final String mlPath;
    BookKeeper bk;
    MetadataStoreExtended store;
    ManagedLedgerFactoryImpl factory;
    boolean leftOpen;

    MlTool(Map<String, List<String>> opts) {
        this.opts = opts;
        this.name = required("name");
        this.mlPath = "/managed-ledgers/" + name;
    }

    public static void main(String[] argv) {
        if (argv.length < 1) {
            fail("usage: MlTool create|trim|delete|offload|read|info --zk HOST:PORT --name NAME [options]");
        }
        String cmd = argv[0];
        int rc = 0;
        MlTool tool = null;
        try {
            tool = new MlTool(parse(Arrays.copyOfRange(argv, 1, argv.length)));
            tool.connect();
            Map<String, Object> out;
            switch (cmd) {
                case "create":
                    out = tool.create();
                    break;
                case "trim":
                    out = tool.trim();
                    break;
                case "delete":
                    out = tool.delete();
                    break;
                case "offload":
                    out = tool.offload();
                    break;
                case "read":
                    out = tool.read();
                    break;
                case "info":
                    out = tool.describe();
                    break;
                default:
                    throw new IllegalArgumentException("unknown command " + cmd);
            }
            if (!tool.leftOpen) {
                tool.shutdown();
            }
            emit(JSON.writeValueAsString(out));
        } catch (Throwable e) {
            e.printStackTrace(System.err);
            String msg = e.getMessage() != null ? e.getClass().getSimpleName() + ": " + e.getMessage() : e.toString();
            emit("{\"error\":" + quote(msg) + "}");
            rc = 3;
        }
        // The BookKeeper and ZooKeeper clients keep non-daemon threads: exit once the result is printed.
        Runtime.getRuntime().halt(rc);
    }

    // ------------------------------------------------------------------ set-up

    void connect() throws Exception {
        String zk = required("zk");
        int slash = zk.indexOf('/');
        String hosts = slash < 0 ? zk : zk.substring(0, slash);
        ClientConfiguration conf = new ClientConfiguration();
        if (opts.containsKey("client-conf")) {
            conf.loadConf(Paths.get(one("client-conf", "")).toUri().toURL());
        }
        conf.setMetadataServiceUri(one("metadata-uri", "zk+hierarchical://" + hosts + "/ledgers"));
        conf.setZkTimeout(6000);
        conf.setAddEntryTimeout(30);
        conf.setReadEntryTimeout(30);
        bk = timed("BookKeeper client", () -> new BookKeeper(conf));
        store = timed("metadata store zk:" + zk, () -> MetadataStoreExtended.create("zk:" + zk,
                MetadataStoreConfig.builder().sessionTimeoutMillis(30000).metadataStoreName("mltool").build()));
        String compression = one("compression", "NONE");
        ManagedLedgerFactoryConfig fc = new ManagedLedgerFactoryConfig();
        fc.setManagedLedgerInfoCompressionType(compression);
        fc.setManagedLedgerInfoCompressionThresholdInBytes(0);
        fc.setManagedCursorInfoCompressionType(compression);
        fc.setManagedCursorInfoCompressionThresholdInBytes(0);
        fc.setMaxCacheSize(16L << 20);
        factory = timed("managed-ledger factory", () -> new ManagedLedgerFactoryImpl(store, bk, fc));
    }

    void shutdown() throws Exception {
        timed("factory shutdown", () -> {
            factory.shutdown();
            return null;
        });
        timed("BookKeeper client close", () -> {
            bk.close();
            return null;
        });
        timed("metadata store close", () -> {
            store.close();
            return null;
        });
    }

    /** The ML configuration of every command; retention and creation set by the caller. */
    ManagedLedgerConfig config(boolean createIfMissing) {
        int e = Integer.parseInt(one("ensemble", "2"));
        int w = Integer.parseInt(one("write-quorum", "2"));
        int a = Integer.parseInt(one("ack-quorum", "2"));
        ManagedLedgerConfig c = new ManagedLedgerConfig();
        c.setEnsembleSize(e).setWriteQuorumSize(w).setAckQuorumSize(a);
        c.setMetadataEnsembleSize(e).setMetadataWriteQuorumSize(w).setMetadataAckQuorumSize(a);
        c.setMinimumRolloverTime(0, TimeUnit.MILLISECONDS);
        c.setCreateIfMissing(createIfMissing);
        c.setMetadataOperationsTimeoutSeconds(TIMEOUT);
        // Keep everything unless a command asks for trimming: with no durable cursor and retention 0 the
        // library trims every ledger but the current one on its own.
        c.setRetentionTime(-1, TimeUnit.MILLISECONDS);
        c.setRetentionSizeInMB(-1);
        String dir = one("offload-dir", null);
        if (dir != null) {
            c.setLedgerOffloader(new DirOffloader(Paths.get(dir)));
        }
        return c;
    }

    ManagedLedger open(ManagedLedgerConfig c) throws Exception {
        ManagedLedger ml = timed("open " + name, () -> factory.open(name, c));
        log("opened " + name + ": ledgers " + ml.getLedgersInfo().keySet());
        return ml;
    }

    void close(ManagedLedger ml) throws Exception {
        timed("close " + name, () -> {
            ml.close();
            return null;
        });
    }

    // ------------------------------------------------------------------ commands

    Map<String, Object> create() throws Exception {
        int ledgers = Integer.parseInt(required("ledgers"));
        int entries = Integer.parseInt(required("entries"));
        int size = Integer.parseInt(one("entry-size", "100"));
        List<String> cursorNames = list("cursors");
        ManagedLedgerConfig c = config(true);
        c.setMaxEntriesPerLedger(entries);
        ManagedLedger ml = open(c);
        List<ManagedCursor> cursors = new ArrayList<>();
        for (String cn : cursorNames) {
            cursors.add(timed("open cursor " + cn, () -> ml.openCursor(cn)));
        }
        Map<Long, Integer> written = new TreeMap<>();
        Position first = null;
        long total = (long) ledgers * entries;
        for (long seq = 0; seq < total; seq++) {
            byte[] data = payload(seq, size);
            Position p = timed("add entry " + seq, () -> ml.addEntry(data));
            if (first == null) {
                first = p;
            }
            written.merge(p.getLedgerId(), 1, Integer::sum);
        }
        if (first != null) {
            // A new cursor keeps its position in its znode only (cursor ledger -1) until its first
            // mark-delete: that one creates the cursor ledger and records it in the znode.
            for (ManagedCursor cursor : cursors) {
                Position at = first;
                timed("mark-delete " + cursor.getName(), () -> {
                    cursor.markDelete(at);
                    return null;
                });
            }
        }
        if (opts.containsKey("leave-open")) {
            // As a broker that still owns the topic, or crashed: the current ledger stays open and each
            // cursor znode keeps naming its cursor ledger. (A clean close persists the cursor position in
            // the znode, with cursor ledger -1, and deletes the cursor ledger.)
            leftOpen = true;
        } else {
            close(ml);
        }
        Map<String, Object> out = describe();
        Map<String, Integer> w = new LinkedHashMap<>();
        written.forEach((k, v) -> w.put(Long.toString(k), v));
        out.put("written", w);
        out.put("entries", total);
        return out;
    }

    Map<String, Object> trim() throws Exception {
        long through = Long.parseLong(required("through-ledger"));
        ManagedLedgerConfig c = config(false);
        c.setRetentionTime(0, TimeUnit.MILLISECONDS);
        c.setRetentionSizeInMB(0);
        ManagedLedger ml = open(c);
        List<Long> before = new ArrayList<>(ml.getLedgersInfo().keySet());
        MLDataFormats.ManagedLedgerInfo.LedgerInfo li = ml.getLedgersInfo().get(through);
        if (li == null) {
            throw new IllegalArgumentException("ledger " + through + " is not in " + name + ": " + before);
        }
        if (li.getEntries() < 1) {
            throw new IllegalArgumentException("ledger " + through + " of " + name + " has no entries (current?)");
        }
        List<ManagedCursor> cursors = new ArrayList<>();
        ml.getCursors().forEach(cursors::add);
        if (cursors.isEmpty()) {
            throw new IllegalArgumentException(name + " has no durable cursor: trimming would remove every ledger");
        }
        Position target = PositionFactory.create(through, li.getEntries() - 1);
        for (ManagedCursor cursor : cursors) {
            if (cursor.getMarkDeletedPosition().compareTo(target) < 0) {
                timed("mark-delete " + cursor.getName(), () -> {
                    cursor.markDelete(target);
                    return null;
                });
            }
        }
        List<Long> expected = new ArrayList<>();
        for (long id : before) {
            if (id <= through) {
                expected.add(id);
            }
        }
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(TIMEOUT);
        while (true) {
            trimOnce(ml);
            List<Long> left = new ArrayList<>(expected);
            left.retainAll(ml.getLedgersInfo().keySet());
            if (left.isEmpty()) {
                break;
            }
            if (System.nanoTime() > deadline) {
                throw new TimeoutException("ledgers " + left + " still in " + name + " after trimming");
            }
            Thread.sleep(200);
        }
        List<Long> after = new ArrayList<>(ml.getLedgersInfo().keySet());
        List<Long> removed = new ArrayList<>(before);
        removed.removeAll(after);
        waitGoneFromBookKeeper(removed);
        close(ml);
        Map<String, Object> out = describe();
        out.put("removed", removed);
        out.put("remaining", after);
        return out;
    }

    Map<String, Object> delete() throws Exception {
        ManagedLedger ml = open(config(false));
        Map<String, Object> had = describe();
        timed("delete " + name, () -> {
            ml.delete();
            return null;
        });
        List<Long> ids = new ArrayList<>();
        for (Object o : (List<?>) had.get("ledgers")) {
            ids.add((Long) ((Map<?, ?>) o).get("ledgerId"));
        }
        for (Object o : ((Map<?, ?>) had.get("cursors")).values()) {
            long cl = (Long) ((Map<?, ?>) o).get("cursorsLedgerId");
            if (cl >= 0) {
                ids.add(cl);
            }
        }
        List<Long> stillInBk = new ArrayList<>();
        for (long id : ids) {
            if (inBookKeeper(id)) {
                stillInBk.add(id);
            }
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("name", name);
        out.put("deleted", true);
        out.put("ledgers", had.get("ledgers"));
        out.put("cursors", had.get("cursors"));
        out.put("znodeExists", await("exists " + mlPath, store.exists(mlPath)));
        out.put("stillInBookKeeper", stillInBk);
        return out;
    }

    Map<String, Object> offload() throws Exception {
        int n = Integer.parseInt(required("ledgers"));
        required("offload-dir");
        ManagedLedger ml = open(config(false));
        long current = ml.getLedgersInfo().lastKey();
        List<Long> closed = new ArrayList<>();
        for (MLDataFormats.ManagedLedgerInfo.LedgerInfo li : ml.getLedgersInfo().values()) {
            if (li.getLedgerId() != current && li.getEntries() > 0) {
                closed.add(li.getLedgerId());
            }
        }
        if (closed.size() < n) {
            throw new IllegalArgumentException(name + " has " + closed.size() + " closed ledgers " + closed
                    + ", fewer than " + n);
        }
        List<Long> chosen = closed.subList(0, n);
        // offloadPrefix(p) offloads every closed ledger before p's ledger: p = entry 0 of the next one.
        long next = ml.getLedgersInfo().higherKey(chosen.get(n - 1));
        Position upTo = PositionFactory.create(next, 0);
        timed("offload up to " + upTo, 2 * TIMEOUT, () -> ml.offloadPrefix(upTo));
        // The deletion lag is measured with a strict "older than": let a millisecond pass, then trim so
        // that the library marks the offloaded ledgers bookkeeperDeleted and deletes their BookKeeper copy.
        Thread.sleep(5);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(TIMEOUT);
        while (true) {
            trimOnce(ml);
            List<Long> pending = new ArrayList<>();
            for (long id : chosen) {
                MLDataFormats.OffloadContext oc = ml.getLedgersInfo().get(id).getOffloadContext();
                if (!oc.getComplete() || !oc.getBookkeeperDeleted()) {
                    pending.add(id);
                }
            }
            if (pending.isEmpty()) {
                break;
            }
            if (System.nanoTime() > deadline) {
                throw new TimeoutException("ledgers " + pending + " not offloaded and marked bookkeeperDeleted");
            }
            Thread.sleep(200);
        }
        waitGoneFromBookKeeper(chosen);
        close(ml);
        Map<String, Object> out = describe();
        List<Long> offloaded = new ArrayList<>();
        List<Long> bkDeleted = new ArrayList<>();
        for (Object o : (List<?>) out.get("ledgers")) {
            Map<?, ?> l = (Map<?, ?>) o;
            Map<?, ?> oc = (Map<?, ?>) l.get("offload");
            if (oc != null && Boolean.TRUE.equals(oc.get("complete"))) {
                offloaded.add((Long) l.get("ledgerId"));
            }
            if (oc != null && Boolean.TRUE.equals(oc.get("bookkeeperDeleted"))) {
                bkDeleted.add((Long) l.get("ledgerId"));
            }
        }
        out.put("offloaded", offloaded);
        out.put("bookkeeperDeleted", bkDeleted);
        out.put("offloadDir", one("offload-dir", null));
        return out;
    }

    Map<String, Object> read() throws Exception {
        int max = Integer.parseInt(one("max", "10000"));
        ManagedLedger ml = open(config(false));
        ManagedCursor cursor = timed("non-durable cursor", () -> ml.newNonDurableCursor(PositionFactory.EARLIEST));
        Map<String, Integer> perLedger = new LinkedHashMap<>();
        List<String> bad = new ArrayList<>();
        int count = 0;
        while (count < max && cursor.hasMoreEntries()) {
            int want = Math.min(100, max - count);
            List<Entry> batch = timed("read entries", () -> cursor.readEntries(want));
            if (batch.isEmpty()) {
                break;
            }
            for (Entry e : batch) {
                perLedger.merge(Long.toString(e.getLedgerId()), 1, Integer::sum);
                if (!wellFormed(e.getData())) {
                    bad.add(e.getLedgerId() + ":" + e.getEntryId());
                }
                e.release();
                count++;
            }
        }
        close(ml);
        Map<String, Object> out = describe();
        out.put("read", count);
        out.put("readPerLedger", perLedger);
        out.put("badContent", bad);
        return out;
    }

    void trimOnce(ManagedLedger ml) throws Exception {
        CompletableFuture<Object> done = new CompletableFuture<>();
        ml.trimConsumedLedgersInBackground(done);
        await("trim " + name, done);
    }

    // ------------------------------------------------------------------ what is stored

    /**
     * The ML znode and its cursor znodes, read raw from the metadata store and parsed by the library's
     * own parser (MetaStoreImpl, which undoes the compression wrapper). For each ledger and cursor
     * ledger, whether BookKeeper still has its metadata.
     */
    Map<String, Object> describe() throws Exception {
        MetaStoreImpl ms = (MetaStoreImpl) factory.getMetaStore();
        Optional<GetResult> raw = await("get " + mlPath, store.get(mlPath));
        if (raw.isEmpty()) {
            throw new IllegalStateException("no managed ledger znode " + mlPath);
        }
        byte[] data = raw.get().getValue();
        MLDataFormats.ManagedLedgerInfo info = ms.parseManagedLedgerInfo(data);
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("name", name);
        out.put("znode", znode(data, raw.get().getStat().getVersion()));
        List<Object> ledgers = new ArrayList<>();
        for (MLDataFormats.ManagedLedgerInfo.LedgerInfo li : info.getLedgerInfoList()) {
            Map<String, Object> l = new LinkedHashMap<>();
            l.put("ledgerId", li.getLedgerId());
            l.put("entries", li.getEntries());
            l.put("size", li.getSize());
            l.put("timestamp", li.getTimestamp());
            if (li.hasOffloadContext()) {
                MLDataFormats.OffloadContext oc = li.getOffloadContext();
                Map<String, Object> o = new LinkedHashMap<>();
                o.put("uuid", new UUID(oc.getUidMsb(), oc.getUidLsb()).toString());
                o.put("complete", oc.getComplete());
                o.put("bookkeeperDeleted", oc.getBookkeeperDeleted());
                o.put("timestamp", oc.getTimestamp());
                o.put("driver", oc.getDriverMetadata().getName());
                l.put("offload", o);
            } else {
                l.put("offload", null);
            }
            l.put("inBookKeeper", inBookKeeper(li.getLedgerId()));
            ledgers.add(l);
        }
        out.put("ledgers", ledgers);
        Map<String, String> props = new LinkedHashMap<>();
        for (MLDataFormats.KeyValue kv : info.getPropertiesList()) {
            props.put(kv.getKey(), kv.getValue());
        }
        out.put("properties", props);
        out.put("terminatedPosition", info.hasTerminatedPosition()
                ? List.of(info.getTerminatedPosition().getLedgerId(), info.getTerminatedPosition().getEntryId())
                : null);
        Map<String, Object> cursors = new TreeMap<>();
        for (String cn : await("children of " + mlPath, store.getChildren(mlPath))) {
            String path = mlPath + "/" + cn;
            Optional<GetResult> cr = await("get " + path, store.get(path));
            if (cr.isEmpty()) {
                continue;
            }
            byte[] cd = cr.get().getValue();
            MLDataFormats.ManagedCursorInfo ci = ms.parseManagedCursorInfo(cd);
            Map<String, Object> c = new LinkedHashMap<>();
            c.put("cursorsLedgerId", ci.getCursorsLedgerId());
            c.put("markDelete", List.of(ci.getMarkDeleteLedgerId(), ci.getMarkDeleteEntryId()));
            Map<String, Long> lp = new LinkedHashMap<>();
            for (MLDataFormats.LongProperty p : ci.getPropertiesList()) {
                lp.put(p.getName(), p.getValue());
            }
            c.put("properties", lp);
            Map<String, String> sp = new LinkedHashMap<>();
            for (MLDataFormats.StringProperty p : ci.getCursorPropertiesList()) {
                sp.put(p.getName(), p.getValue());
            }
            c.put("cursorProperties", sp);
            c.put("inBookKeeper", ci.getCursorsLedgerId() >= 0 && inBookKeeper(ci.getCursorsLedgerId()));
            c.put("znode", znode(cd, cr.get().getStat().getVersion()));
            cursors.put(cn, c);
        }
        out.put("cursors", cursors);
        return out;
    }

    static Map<String, Object> znode(byte[] data, long version) {
        Map<String, Object> z = new LinkedHashMap<>();
        z.put("bytes", data.length);
        z.put("wrapped", data.length >= 2 && (data[0] & 0xff) == 0x47 && (data[1] & 0xff) == 0x78);
        z.put("version", version);
        return z;
    }

    boolean inBookKeeper(long ledgerId) throws Exception {
        try {
            bk.getLedgerManager().readLedgerMetadata(ledgerId).get(TIMEOUT, TimeUnit.SECONDS);
            return true;
        } catch (ExecutionException e) {
            Throwable cause = e.getCause();
            if (cause instanceof BKException) {
                int code = ((BKException) cause).getCode();
                if (code == BKException.Code.NoSuchLedgerExistsOnMetadataServerException
                        || code == BKException.Code.NoSuchLedgerExistsException) {
                    return false;
                }
            }
            throw e;
        }
    }

    void waitGoneFromBookKeeper(List<Long> ids) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(TIMEOUT);
        List<Long> left = new ArrayList<>(ids);
        while (true) {
            List<Long> still = new ArrayList<>();
            for (long id : left) {
                if (inBookKeeper(id)) {
                    still.add(id);
                }
            }
            if (still.isEmpty()) {
                return;
            }
            if (System.nanoTime() > deadline) {
                throw new TimeoutException("ledgers " + still + " still in BookKeeper");
            }
            left = still;
            Thread.sleep(200);
        }
    }

    // ------------------------------------------------------------------ payloads

    static byte[] payload(long seq, int size) {
        String unit = "E" + seq + "-";
        StringBuilder sb = new StringBuilder(size + unit.length());
        while (sb.length() < size) {
            sb.append(unit);
        }
        return sb.substring(0, size).getBytes(StandardCharsets.US_ASCII);
    }

    /** Whether an entry is "E<n>-" repeated (what create writes). */
    static boolean wellFormed(byte[] data) {
        String s = new String(data, StandardCharsets.US_ASCII);
        int dash = s.indexOf('-');
        if (!s.startsWith("E") || dash < 2) {
            return false;
        }
        try {
            return Arrays.equals(data, payload(Long.parseLong(s.substring(1, dash)), data.length));
        } catch (NumberFormatException e) {
            return false;
        }
    }

    // ------------------------------------------------------------------ the offloader

    /**
     * A tiered-storage stand-in: a ledger offloaded with uid U is the file DIR/LEDGER-U.entries, each entry
     * as a 4-byte big-endian length and its bytes, entries 0..LAC in order. Its policies set the offload
     * deletion lag to 0 (the library reads the lag from the offloader's OffloadPolicies) and disable
     * automatic offloading (thresholds -1).
     */
    static final class DirOffloader implements LedgerOffloader {
        final Path dir;
        final OffloadPoliciesImpl policies = new OffloadPoliciesImpl();

        DirOffloader(Path dir) {
            this.dir = dir;
            policies.setManagedLedgerOffloadDriver("mltool-dir");
            policies.setManagedLedgerOffloadDeletionLagInMillis(0L);
            policies.setManagedLedgerOffloadThresholdInBytes(-1L);
            policies.setManagedLedgerOffloadThresholdInSeconds(-1L);
        }

        Path file(long ledgerId, UUID uid) {
            return dir.resolve(ledgerId + "-" + uid + ".entries");
        }

        @Override
        public String getOffloadDriverName() {
            return "mltool-dir";
        }

        @Override
        public Map<String, String> getOffloadDriverMetadata() {
            return Map.of("dir", dir.toString());
        }

        @Override
        public CompletableFuture<Void> offload(ReadHandle rh, UUID uid, Map<String, String> extra) {
            return CompletableFuture.runAsync(() -> {
                try {
                    Files.createDirectories(dir);
                    Path out = file(rh.getId(), uid);
                    Path tmp = dir.resolve(out.getFileName() + ".tmp");
                    long lac = rh.getLastAddConfirmed();
                    try (OutputStream os = Files.newOutputStream(tmp);
                            DataOutputStream dos = new DataOutputStream(os)) {
                        for (long first = 0; first <= lac; first += 100) {
                            long last = Math.min(lac, first + 99);
                            try (LedgerEntries es = rh.readAsync(first, last).get(TIMEOUT, TimeUnit.SECONDS)) {
                                for (LedgerEntry e : es) {
                                    byte[] b = e.getEntryBytes();
                                    dos.writeInt(b.length);
                                    dos.write(b);
                                }
                            }
                        }
                    }
                    Files.move(tmp, out, StandardCopyOption.ATOMIC_MOVE);
                    log("offloaded ledger " + rh.getId() + " (" + (lac + 1) + " entries) to " + out);
                } catch (Exception e) {
                    throw new RuntimeException("offloading ledger " + rh.getId() + ": " + e, e);
                }
            }, CALLS);
        }

        @Override
        public CompletableFuture<ReadHandle> readOffloaded(long ledgerId, UUID uid, Map<String, String> meta) {
            return CompletableFuture.supplyAsync(() -> {
                List<byte[]> entries = new ArrayList<>();
                try (InputStream is = Files.newInputStream(file(ledgerId, uid));
                        DataInputStream dis = new DataInputStream(is)) {
                    while (dis.available() > 0) {
                        byte[] b = new byte[dis.readInt()];
                        dis.readFully(b);
                        entries.add(b);
                    }
                } catch (IOException e) {
                    throw new RuntimeException("reading offloaded ledger " + ledgerId + ": " + e, e);
                }
                return new FileReadHandle(ledgerId, entries);
            }, CALLS);
        }

        @Override
        public CompletableFuture<Void> deleteOffloaded(long ledgerId, UUID uid, Map<String, String> meta) {
            return CompletableFuture.runAsync(() -> {
                try {
                    Files.deleteIfExists(file(ledgerId, uid));
                    log("deleted offloaded copy of ledger " + ledgerId);
                } catch (IOException e) {
                    throw new RuntimeException(e);
                }
            }, CALLS);
        }

        @Override
        public OffloadPolicies getOffloadPolicies() {
            return policies;
        }

        @Override
        public void close() {
        }
    }

    /** A closed ledger's entries read back from the offload directory (no BookKeeper metadata). */
    static final class FileReadHandle implements ReadHandle {
        final long id;
        final List<byte[]> entries;
        long length;

        FileReadHandle(long id, List<byte[]> entries) {
            this.id = id;
            this.entries = entries;
            for (byte[] b : entries) {
                length += b.length;
            }
        }

        @Override
        public CompletableFuture<LedgerEntries> readAsync(long first, long last) {
            if (first < 0 || last >= entries.size() || first > last) {
                return CompletableFuture.failedFuture(new BKException.BKIncorrectParameterException());
            }
            List<LedgerEntry> out = new ArrayList<>();
            for (long e = first; e <= last; e++) {
                byte[] b = entries.get((int) e);
                out.add(LedgerEntryImpl.create(id, e, b.length, Unpooled.wrappedBuffer(b)));
            }
            return CompletableFuture.completedFuture(LedgerEntriesImpl.create(out));
        }

        @Override
        public CompletableFuture<LedgerEntries> readUnconfirmedAsync(long first, long last) {
            return readAsync(first, last);
        }

        @Override
        public CompletableFuture<Long> readLastAddConfirmedAsync() {
            return CompletableFuture.completedFuture(getLastAddConfirmed());
        }

        @Override
        public CompletableFuture<Long> tryReadLastAddConfirmedAsync() {
            return readLastAddConfirmedAsync();
        }

        @Override
        public long getLastAddConfirmed() {
            return entries.size() - 1;
        }

        @Override
        public long getLength() {
            return length;
        }

        @Override
        public boolean isClosed() {
            return true;
        }

        @Override
        public CompletableFuture<LastConfirmedAndEntry> readLastAddConfirmedAndEntryAsync(
                long entryId, long timeOutInMillis, boolean parallel) {
            return CompletableFuture.failedFuture(new UnsupportedOperationException("long poll on an offloaded ledger"));
        }

        @Override
        public long getId() {
            return id;
        }

        @Override
        public CompletableFuture<Void> closeAsync() {
            return CompletableFuture.completedFuture(null);
        }

        @Override
        public LedgerMetadata getLedgerMetadata() {
            return null;
        }
    }

    // ------------------------------------------------------------------ plumbing

    static <T> T timed(String what, Callable<T> call) throws Exception {
        return timed(what, TIMEOUT, call);
    }

    /** Every library call is bounded: a call still running after `seconds` fails the command. */
    static <T> T timed(String what, int seconds, Callable<T> call) throws Exception {
        Future<T> f = CALLS.submit(call);
        try {
            return f.get(seconds, TimeUnit.SECONDS);
        } catch (TimeoutException e) {
            f.cancel(true);
            throw new TimeoutException(what + ": no answer within " + seconds + " s");
        } catch (ExecutionException e) {
            throw new Exception(what + ": " + e.getCause(), e.getCause());
        }
    }

    static <T> T await(String what, CompletableFuture<T> f) throws Exception {
        try {
            return f.get(TIMEOUT, TimeUnit.SECONDS);
        } catch (TimeoutException e) {
            throw new TimeoutException(what + ": no answer within " + TIMEOUT + " s");
        } catch (ExecutionException e) {
            throw new Exception(what + ": " + e.getCause(), e.getCause());
        }
    }

    String required(String key) {
        String v = one(key, null);
        if (v == null || v.isEmpty()) {
            throw new IllegalArgumentException("--" + key + " is required");
        }
        return v;
    }

    String one(String key, String dflt) {
        List<String> v = opts.get(key);
        return v == null || v.isEmpty() ? dflt : v.get(v.size() - 1);
    }

    List<String> list(String key) {
        List<String> out = new ArrayList<>();
        String v = one(key, "");
        for (String s : v.split(",")) {
            if (!s.isBlank()) {
                out.add(s.trim());
            }
        }
        return out;
    }

    static Map<String, List<String>> parse(String[] args) {
        Map<String, List<String>> out = new HashMap<>();
        for (int i = 0; i < args.length; i++) {
            if (!args[i].startsWith("--")) {
                throw new IllegalArgumentException("unexpected argument " + args[i]);
            }
            String key = args[i].substring(2);
            boolean flag = i + 1 >= args.length || args[i + 1].startsWith("--");
            out.computeIfAbsent(key, k -> new ArrayList<>()).add(flag ? "" : args[++i]);
        }
        return out;
    }

    static void log(String msg) {
        System.err.println("mltool: " + msg);
    }

    static void emit(String json) {
        System.out.println(json);
        System.out.flush();
    }

    static String quote(String s) {
        try {
            return JSON.writeValueAsString(s);
        } catch (Exception e) {
            return "\"?\"";
        }
    }

    static void fail(String msg) {
        emit("{\"error\":" + quote(msg) + "}");
        Runtime.getRuntime().halt(2);
    }
}
