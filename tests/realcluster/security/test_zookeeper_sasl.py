"""bk-auditor against a real ZooKeeper that enforces SASL DIGEST-MD5 authentication
(`zookeeper.sessionRequireClientSASLAuth`), with a real BookKeeper 4.17.3 bookie and shell running with
`zkEnableSecurity=true` as SASL user `bk` (so BookKeeper's znodes are CREATOR_ALL_ACL, `sasl:bk`).

Without credentials bk-auditor is refused with one line naming the servers (exit 2); with the cluster's
JAAS file it reads the cluster; the znodes it creates carry the ACL BookKeeper gives its own.
One secured cluster for the module.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.security import ACL, Id, Permissions

from auditor.metadata.bookkeeper.election import LeaderElection
from auditor.metadata.store import ZooKeeperMetadataStore
from auditor.metadata.zk.security import SaslLogin, ZkSecurity, ZooKeeperAuthError
from devcluster import ports
from devcluster.cli_util import cli, error_lines, json_findings
from devcluster.cluster import Cluster, secured_cluster
from devcluster.daemon_util import Daemon

pytestmark = pytest.mark.realcluster

USERS = {"bk": "bk-secret", "other": "other-secret"}
BK_ACL = [ACL(Permissions.ALL, Id("sasl", "bk"))]


@pytest.fixture(scope="module")
def sasl_cluster() -> Iterator[Cluster]:
    with secured_cluster(
        "bk-auditor-zk-sasl-",
        ports.SASL_ZK_PORT,
        sasl_users=USERS,
        require_sasl=True,
        java_user="bk",
        secure_acls=True,
    ) as c:
        yield c


@pytest.fixture(scope="module")
def ledger(sasl_cluster: Cluster) -> dict:
    return sasl_cluster.create_ledger(ensemble=1, write_quorum=1, ack_quorum=1, entries=5)


def test_bookkeeper_znodes_are_creator_only(sasl_cluster: Cluster, ledger: dict) -> None:
    # The premise: with zkEnableSecurity the Java side made its znodes readable by `bk` alone.
    acls, _ = sasl_cluster.kazoo.get_acls(f"{sasl_cluster.ledgers_root}/LAYOUT")
    assert acls == BK_ACL


def test_without_credentials_refused_naming_the_servers(sasl_cluster: Cluster, ledger: dict) -> None:
    proc = cli("check", "--metadata-service-uri", sasl_cluster.metadata_service_uri, "--checks", "scrutiny")
    assert proc.returncode == 2, proc.stderr[-3000:]
    (line,) = error_lines(proc.stderr)
    assert sasl_cluster.zk_hosts in line and "no credentials" in line, line


def test_wrong_password_refused(sasl_cluster: Cluster, ledger: dict, tmp_path: Path) -> None:
    assert sasl_cluster.zk_security is not None
    jaas = sasl_cluster.zk_security.write_client_jaas("wrong-jaas.conf", "bk", password="not-the-password")
    config = tmp_path / "bk.properties"
    config.write_text(
        f"metadataServiceUri={sasl_cluster.metadata_service_uri}\njava.security.auth.login.config={jaas}\n"
    )
    proc = cli("check", "--config", str(config), "--checks", "scrutiny")
    assert proc.returncode == 2, proc.stderr[-3000:]
    (line,) = error_lines(proc.stderr)
    assert sasl_cluster.zk_hosts in line and "refused our credentials" in line and "user bk" in line, line


def test_check_with_the_clusters_jaas_file(sasl_cluster: Cluster, ledger: dict, tmp_path: Path) -> None:
    """The keys a bookie operator already has: zkEnableSecurity and the JVM's JAAS file."""
    assert sasl_cluster.zk_security is not None
    config = tmp_path / "bk.properties"
    config.write_text(
        f"metadataServiceUri={sasl_cluster.metadata_service_uri}\n"
        "zkEnableSecurity=true\n"
        f"java.security.auth.login.config={sasl_cluster.zk_security.client_jaas}\n"
    )
    proc = cli("check", "--config", str(config), "--checks", "scrutiny", "--format", "json")
    # A one-bookie ledger (E=WQ=AQ=1) is judged risky_quorum: the check read it through SASL.
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert [(f["ledgerId"], f["category"]) for f in json_findings(proc.stdout)] == [
        (ledger["ledgerId"], "risky_quorum")
    ]


async def test_znodes_we_create_get_bookkeepers_acl(sasl_cluster: Cluster, ledger: dict) -> None:
    """Markers, our own subtree and election votes: CREATOR_ALL_ACL as `sasl:bk`, like BookKeeper's own."""
    security = ZkSecurity(sasl=SaslLogin("bk", USERS["bk"]), secure_acls=True)
    store = await ZooKeeperMetadataStore.connect(sasl_cluster.metadata_service_uri, security=security)
    root = store.root
    election = LeaderElection(store.bridge, f"{root}/bk-auditor/election", "auditor:1", ledgers_root=root)
    try:
        await election.start()
        await election.wait_leader(30)
        await store.put(f"{root}/bk-auditor/checks/acl-test", b"{}", election.guard)
        await store.mark_underreplicated(ledger["ledgerId"], ["127.0.0.9:3181"], election.guard)
        marker = await store.read_marker(ledger["ledgerId"])
        assert marker is not None
        created = [
            f"{root}/bk-auditor",
            f"{root}/bk-auditor/election",
            election.vote_path,
            f"{root}/bk-auditor/checks",
            f"{root}/bk-auditor/checks/acl-test",
            marker.path,
            marker.path.rsplit("/", 1)[0],  # a marker parent we created
        ]
        for path in created:
            assert path is not None
            acls, _ = sasl_cluster.kazoo.get_acls(path)
            assert acls == BK_ACL, path
        # Another authenticated user cannot read them (as with BookKeeper's own znodes).
        other = ZkSecurity(sasl=SaslLogin("other", USERS["other"]))
        with pytest.raises(ZooKeeperAuthError, match="NoAuth"):
            await ZooKeeperMetadataStore.connect(sasl_cluster.metadata_service_uri, security=other)
    finally:
        await election.close()
        sasl_cluster.kazoo.delete(f"{root}/bk-auditor", recursive=True)
        await store.close()


def test_daemon_without_credentials_exits_2(sasl_cluster: Cluster, ledger: dict, tmp_path: Path) -> None:
    d = Daemon(sasl_cluster, "no-credentials", tmp_path).start()
    try:
        rc = d.proc.wait(60)
    finally:
        d.kill()
    assert rc == 2, d.tail()
    errors = [e for e in d.logs() if e.get("level") == "error"]
    assert errors and "requires SASL authentication" in errors[-1]["error"], d.tail()
    assert sasl_cluster.zk_hosts in errors[-1]["error"]


def test_daemon_with_the_jaas_file_leads_with_secured_votes(
    sasl_cluster: Cluster, ledger: dict, tmp_path: Path
) -> None:
    assert sasl_cluster.zk_security is not None
    auth = {"jaas_file": str(sasl_cluster.zk_security.client_jaas), "secure_acls": True}
    d = Daemon(sasl_cluster, "sasl-leader", tmp_path, zookeeper={"auth": auth}).start()
    try:
        d.wait(d.is_leader, 60, "leadership")
        election = f"{sasl_cluster.ledgers_root}/bk-auditor/election"
        votes = sasl_cluster.kazoo.get_children(election)
        assert votes
        for path in (election, f"{election}/{votes[0]}"):
            assert sasl_cluster.kazoo.get_acls(path)[0] == BK_ACL, path
    finally:
        d.stop()


def test_operator_recovery_delay_stays_open(sasl_cluster: Cluster, ledger: dict, tmp_path: Path) -> None:
    """BookKeeper creates lostBookieRecoveryDelay open whatever zkEnableSecurity says (every principal
    may set it); so does our operator command."""
    assert sasl_cluster.zk_security is not None
    zk = sasl_cluster.kazoo
    delay = f"{sasl_cluster.ledgers_root}/underreplication/lostBookieRecoveryDelay"
    zk.ensure_path(f"{sasl_cluster.ledgers_root}/underreplication")
    if zk.exists(delay):
        zk.delete(delay)
    config = tmp_path / "bk.properties"
    config.write_text(
        f"metadataServiceUri={sasl_cluster.metadata_service_uri}\nzkEnableSecurity=true\n"
        f"java.security.auth.login.config={sasl_cluster.zk_security.client_jaas}\n"
    )
    r = cli("recovery-delay", "30", "--yes", "--config", str(config))
    assert r.returncode == 0, r.stderr[-3000:]
    data, _ = zk.get(delay)
    assert data == b"30"
    assert zk.get_acls(delay)[0] == [ACL(Permissions.ALL, Id("world", "anyone"))]
