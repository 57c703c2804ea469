// Dumps a ZooKeeper data directory's transaction log as JSON lines, with ZooKeeper's own reader.
//
// Why not TxnLogToolkit: it prints times to the second and znode data raw (a ledger's binary metadata
// breaks its lines). This reads the same log through the same classes the server replays it with
// (FileTxnLog's iterator over every log file from a zxid on, in order, across restarts and rolls; the jute
// records of org.apache.zookeeper.txn) and prints one line per change, a multi's sub-operations one each:
//   {"t":ms,"s":session,"z":zxid,"cx":cxid,"op":"create|delete|setData|check|setACL|createSession|
//    closeSession|error","path":...,"ver":n,"eph":bool,"len":n,"sub":i,"err":code,"to":ms,"paths":[...]}
// A failed request (or failed multi) is logged by ZooKeeper as an error txn: printed as op "error".
// Usage: java -cp <zookeeper jars>:<this> ZkTxnDump <dataDir/version-2> [fromZxid]
import java.io.File;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.List;
import org.apache.jute.Record;
import org.apache.zookeeper.ZooDefs.OpCode;
import org.apache.zookeeper.server.ByteBufferInputStream;
import org.apache.zookeeper.server.persistence.FileTxnLog;
import org.apache.zookeeper.server.persistence.TxnLog.TxnIterator;
import org.apache.zookeeper.txn.CheckVersionTxn;
import org.apache.zookeeper.txn.CloseSessionTxn;
import org.apache.zookeeper.txn.CreateContainerTxn;
import org.apache.zookeeper.txn.CreateSessionTxn;
import org.apache.zookeeper.txn.CreateTTLTxn;
import org.apache.zookeeper.txn.CreateTxn;
import org.apache.zookeeper.txn.DeleteTxn;
import org.apache.zookeeper.txn.ErrorTxn;
import org.apache.zookeeper.txn.MultiTxn;
import org.apache.zookeeper.txn.SetACLTxn;
import org.apache.zookeeper.txn.SetDataTxn;
import org.apache.zookeeper.txn.Txn;
import org.apache.zookeeper.txn.TxnHeader;

public class ZkTxnDump {
    public static void main(String[] args) throws Exception {
        File dir = new File(args[0]);
        long from = args.length > 1 ? Long.parseLong(args[1]) : 0L;
        FileTxnLog log = new FileTxnLog(dir);
        StringBuilder out = new StringBuilder();
        long n = 0;
        TxnIterator it = log.read(from);
        try {
            while (it.getHeader() != null) {
                TxnHeader h = it.getHeader();
                if (h.getZxid() >= from) {
                    emit(out, h, it.getTxn(), h.getType(), -1);
                    n++;
                }
                if (out.length() > 1 << 16) {
                    System.out.print(out);
                    out.setLength(0);
                }
                if (!it.next()) {
                    break;
                }
            }
        } catch (IOException e) {
            // the live file's tail: a record being written (or a torn one after a crash)
            out.append("{\"tail_error\":").append(str(String.valueOf(e))).append("}\n");
        } finally {
            it.close();
        }
        out.append("{\"end\":true,\"txns\":").append(n).append("}\n");
        System.out.print(out);
        System.out.flush();
    }

    static void emit(StringBuilder out, TxnHeader h, Record txn, int type, int sub) throws IOException {
        if (type == OpCode.multi && txn instanceof MultiTxn) {
            List<Txn> txns = ((MultiTxn) txn).getTxns();
            for (int i = 0; i < txns.size(); i++) {
                Txn t = txns.get(i);
                Record r = subRecord(t.getType());
                if (r != null) {
                    ByteBufferInputStream.byteBuffer2Record(ByteBuffer.wrap(t.getData()), r);
                }
                emit(out, h, r, t.getType(), i);
            }
            return;
        }
        out.append("{\"t\":").append(h.getTime());
        out.append(",\"s\":").append(h.getClientId());
        out.append(",\"z\":").append(h.getZxid());
        out.append(",\"cx\":").append(h.getCxid());
        if (sub >= 0) {
            out.append(",\"sub\":").append(sub);
        }
        if (txn instanceof CreateTxn) {
            CreateTxn c = (CreateTxn) txn;
            out.append(",\"op\":\"create\",\"path\":").append(str(c.getPath()));
            out.append(",\"eph\":").append(c.getEphemeral()).append(",\"len\":").append(len(c.getData()));
        } else if (txn instanceof CreateContainerTxn) {
            CreateContainerTxn c = (CreateContainerTxn) txn;
            out.append(",\"op\":\"create\",\"path\":").append(str(c.getPath()));
            out.append(",\"eph\":false,\"len\":").append(len(c.getData()));
        } else if (txn instanceof CreateTTLTxn) {
            CreateTTLTxn c = (CreateTTLTxn) txn;
            out.append(",\"op\":\"create\",\"path\":").append(str(c.getPath()));
            out.append(",\"eph\":false,\"len\":").append(len(c.getData()));
        } else if (txn instanceof DeleteTxn) {
            out.append(",\"op\":\"delete\",\"path\":").append(str(((DeleteTxn) txn).getPath()));
        } else if (txn instanceof SetDataTxn) {
            SetDataTxn s = (SetDataTxn) txn;
            out.append(",\"op\":\"setData\",\"path\":").append(str(s.getPath()));
            out.append(",\"ver\":").append(s.getVersion()).append(",\"len\":").append(len(s.getData()));
        } else if (txn instanceof CheckVersionTxn) {
            CheckVersionTxn c = (CheckVersionTxn) txn;
            out.append(",\"op\":\"check\",\"path\":").append(str(c.getPath()));
            out.append(",\"ver\":").append(c.getVersion());
        } else if (txn instanceof SetACLTxn) {
            out.append(",\"op\":\"setACL\",\"path\":").append(str(((SetACLTxn) txn).getPath()));
        } else if (txn instanceof CreateSessionTxn) {
            out.append(",\"op\":\"createSession\",\"to\":").append(((CreateSessionTxn) txn).getTimeOut());
        } else if (type == OpCode.closeSession) {
            out.append(",\"op\":\"closeSession\",\"paths\":[");
            if (txn instanceof CloseSessionTxn && ((CloseSessionTxn) txn).getPaths2Delete() != null) {
                List<String> paths = ((CloseSessionTxn) txn).getPaths2Delete();
                for (int i = 0; i < paths.size(); i++) {
                    out.append(i > 0 ? "," : "").append(str(paths.get(i)));
                }
            }
            out.append("]");
        } else if (txn instanceof ErrorTxn) {
            out.append(",\"op\":\"error\",\"err\":").append(((ErrorTxn) txn).getErr());
        } else {
            out.append(",\"op\":\"other\",\"type\":").append(type);
        }
        out.append("}\n");
    }

    static Record subRecord(int type) {
        switch (type) {
            case OpCode.create:
            case OpCode.create2:
                return new CreateTxn();
            case OpCode.createContainer:
                return new CreateContainerTxn();
            case OpCode.createTTL:
                return new CreateTTLTxn();
            case OpCode.delete:
            case OpCode.deleteContainer:
                return new DeleteTxn();
            case OpCode.setData:
                return new SetDataTxn();
            case OpCode.check:
                return new CheckVersionTxn();
            case OpCode.error:
                return new ErrorTxn();
            default:
                return null;
        }
    }

    static int len(byte[] b) {
        return b == null ? -1 : b.length;
    }

    static String str(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '"' || c == '\\') {
                b.append('\\').append(c);
            } else if (c < 0x20 || c > 0x7e) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.append('"').toString();
    }
}
