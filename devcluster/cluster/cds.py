"""Class-data sharing (CDS) archives for the test cluster's JVMs: a bookie, the shell or ZooKeeper then
starts from classes the JVM maps from an archive instead of loading them from a hundred jars.

Measured on this project's 2-core machine (2026-12-03): a 4.17.3 SortedLedgerStorage bookie's start to "Started component bookie-server"
took 5.7-6.6 s without an archive and 3.4-3.7 s with one; a trivial BookieShell command 2.2 s and 1.4 s.
A suite starts bookies and the shell hundreds of times.

The archive is made by the JVMs themselves, once per machine, JDK and class path: the first JVM of a
kind writes a dynamic archive when it exits normally (`-XX:ArchiveClassesAtExit`, into a file of its
own), and the harness publishes that file under its final name after the clean exit; every later JVM of
that kind maps it (`-XX:SharedArchiveFile`, `-Xshare:auto`). A JVM killed before it exits writes
nothing, and the next one tries again. The JVM itself checks the archive against the jars (their sizes and
times) and runs without it when they differ. Its own log lines go to stderr, never into the stdout the
harness parses. `BK_CDS=0` turns all of it off. Class paths with a directory (our compiled tools) cannot
be archived (the JVM refuses them) and get no flags.
"""

from __future__ import annotations

import glob
import hashlib
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

ENABLED = os.environ.get("BK_CDS", "1") != "0"
CDS_DIR = Path(os.environ.get("BK_CDS_DIR", Path.home() / ".cache" / "bk-auditor-cds"))
# The JVM's unified logging (CDS warnings among it) on stderr: stdout is a tool's result.
QUIET = ["-Xlog:disable", "-Xlog:all=warning:stderr"]


@dataclass(frozen=True)
class ArchiveRun:
    """The CDS flags of one JVM run; `written` is where it writes a new archive (None: it maps one)."""

    flags: list[str]
    written: Path | None = None
    final: Path | None = None

    def publish(self, clean_exit: bool) -> None:
        """After the JVM ended: a complete archive of a clean exit becomes the kind's archive."""
        if self.written is None or self.final is None:
            return
        if clean_exit and self.written.exists() and self.written.stat().st_size > 0:
            os.replace(self.written, self.final)
        else:
            self.written.unlink(missing_ok=True)
        self.final.with_suffix(".writing").unlink(missing_ok=True)


NONE = ArchiveRun([])


def _jars(cp: str) -> list[str] | None:
    """The class path's jars in the JVM's order, or None when it has a directory (not archivable)."""
    out: list[str] = []
    for item in cp.split(":"):
        if item.endswith("/*"):
            out += sorted(glob.glob(item[:-1] + "*.jar"))
        elif item.endswith(".jar"):
            out.append(item)
        else:
            return None
    return out


def _java_home() -> str:
    java = shutil.which("java")
    return os.path.realpath(java) if java else "java"


def archive_run(kind: str, cp: str) -> ArchiveRun:
    """The flags for a JVM of `kind` (bookie, shell, zookeeper, ...) on class path `cp`."""
    if not ENABLED:
        return NONE
    jars = _jars(cp)
    if jars is None:
        return ArchiveRun(list(QUIET))
    key = hashlib.sha256("\n".join([_java_home(), *jars]).encode()).hexdigest()[:16]
    final = CDS_DIR / f"{kind}-{key}.jsa"
    if final.exists():
        return ArchiveRun([*QUIET, "-Xshare:auto", f"-XX:SharedArchiveFile={final}"])
    if not _claim(final.with_suffix(".writing")):
        return ArchiveRun(list(QUIET))  # another JVM of this kind is writing it: one writer is enough
    written = CDS_DIR / f"{kind}-{key}.{os.getpid()}-{os.urandom(4).hex()}.tmp"
    return ArchiveRun([*QUIET, f"-XX:ArchiveClassesAtExit={written}"], written, final)


def _claim(claim: Path) -> bool:
    """The right to write an archive: a claim file made exclusively, released when the writer's run ends
    (publish); a claim older than CLAIM_SECONDS (its writer never ended cleanly) is taken over."""
    CDS_DIR.mkdir(parents=True, exist_ok=True)
    try:
        if time.time() - claim.stat().st_mtime > CLAIM_SECONDS:
            claim.unlink(missing_ok=True)
    except FileNotFoundError:
        pass
    try:
        os.close(os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


CLAIM_SECONDS = 1800.0


def class_path(argv: list[str]) -> str | None:
    """The -cp value of a java command line."""
    for flag in ("-cp", "-classpath"):
        if flag in argv:
            return argv[argv.index(flag) + 1]
    return None
