"""A second real cluster (ZooKeeper and bookies) on the second-cluster ports, for a module that needs a
cluster of its own beside the session one: started, yielded, stopped and its folder removed."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from devcluster import ports
from devcluster.cluster import Cluster


@contextmanager
def second_cluster(prefix: str, num_bookies: int, **options: Any) -> Iterator[Cluster]:
    workdir = Path(tempfile.mkdtemp(prefix=prefix))
    c = Cluster(
        workdir,
        zk_port=ports.SECOND_ZK_PORT,
        port_base=ports.SECOND_PORT_BASE,
        http_base=ports.SECOND_HTTP_BASE,
        num_bookies=num_bookies,
        **options,
    )
    try:
        c.start()
        yield c
    finally:
        c.stop()
        shutil.rmtree(workdir, ignore_errors=True)
