// Test-harness tool: removes entries of one ledger from a STOPPED DbLedgerStorage bookie's `locations`
// RocksDB index, with the bookie's own RocksDB library (so the files stay in the format the bookie
// reads). It plants "the index lost these entries": the bookie then answers NOENTRY for them.
//
//   java -cp <this>:<bookkeeper lib/*> IndexSurgeon <indexDir>/current/locations <ledgerId> <first> <last>
//
// Prints one JSON object: how many of the keys in [first, last] existed and were deleted.
import java.nio.ByteBuffer;
import org.rocksdb.Options;
import org.rocksdb.RocksDB;
import org.rocksdb.WriteOptions;

public final class IndexSurgeon {
    private static byte[] key(long ledgerId, long entryId) {
        return ByteBuffer.allocate(16).putLong(ledgerId).putLong(entryId).array();
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 4) {
            System.err.println("usage: IndexSurgeon <locations db dir> <ledgerId> <firstEntry> <lastEntry>");
            System.exit(2);
        }
        String path = args[0];
        long ledgerId = Long.parseLong(args[1]);
        long first = Long.parseLong(args[2]);
        long last = Long.parseLong(args[3]);
        RocksDB.loadLibrary();
        int deleted = 0;
        try (Options options = new Options().setCreateIfMissing(false);
                RocksDB db = RocksDB.open(options, path);
                WriteOptions sync = new WriteOptions().setSync(true)) {
            for (long e = first; e <= last; e++) {
                byte[] k = key(ledgerId, e);
                if (db.get(k) != null) {
                    db.delete(sync, k);
                    deleted++;
                }
            }
            db.flushWal(true);
        }
        System.out.println("{\"deleted\": " + deleted + ", \"ledgerId\": " + ledgerId + "}");
    }
}
