"""The ZooKeeper connection and wire under the metadata store: kazoo bridged to asyncio (`bridge`), the
connection's primitives and guarded writes (`connection`), the bulk read-only session (`wire`), and
ZooKeeper security (`security`)."""
