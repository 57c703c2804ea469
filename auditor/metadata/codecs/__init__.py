"""Pure codecs of BookKeeper's ZooKeeper data: znode payloads (`formats`), the LAYOUT znode (`layout`), and
ledger id <-> znode path for every ledger manager (`paths`). Bytes in, model out, and back; no I/O."""
