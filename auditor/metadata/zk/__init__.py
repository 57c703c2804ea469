"""The ZooKeeper connection and wire under the metadata store: where the metadata lives (`location`), kazoo
bridged to asyncio (`bridge`), the connection's primitives and guarded writes (`connection`), the bulk
read-only session (`wire`), ZooKeeper security (`security`), and the store composed of the recipes (`store`)."""
