"""The exactly-once copier over SASL_SSL with SCRAM-SHA-512
and least-privilege ACLs: output == input, exactly once, in order."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from oncelog.embedded import EmbeddedBroker

from .helpers import create_topic, produce
from .security import make_tls, secured_settings
from .test_copier import COPIER, Reader

N, PARTS = 6000, 2


def test_copier_over_sasl_ssl_with_least_privilege(tmp_path: Path) -> None:
    tls = make_tls(tmp_path / "tls")
    settings = secured_settings(
        tls,
        **{
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            # the PLAINTEXT listener is the operator's bootstrap channel in this test
            "super.users": "User:ANONYMOUS",
            "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        },
    )
    with EmbeddedBroker(tmp_path / "data", settings=settings) as b:
        setup = b.bootstrap_for("PLAINTEXT")
        admin = AdminClient({"bootstrap.servers": setup})
        info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
        admin.alter_user_scram_credentials(
            [UserScramCredentialUpsertion("copier", info, b"copier-pw")]
        )["copier"].result(15)

        def allow(
            rtype: ResourceType,
            name: str,
            op: AclOperation,
            pattern: ResourcePatternType = ResourcePatternType.LITERAL,
        ) -> AclBinding:
            return AclBinding(rtype, name, pattern, "User:copier", "*", op, AclPermissionType.ALLOW)

        # exactly what docs/security.md grants the copier, nothing on the Cluster
        acls = [
            allow(ResourceType.TOPIC, "input", AclOperation.READ),
            allow(ResourceType.TOPIC, "output", AclOperation.WRITE),
            allow(ResourceType.GROUP, "copier-group", AclOperation.READ),
            allow(
                ResourceType.TRANSACTIONAL_ID,
                "copier-",
                AclOperation.WRITE,
                ResourcePatternType.PREFIXED,
            ),
        ]
        for f in admin.create_acls(acls).values():
            f.result(15)
        create_topic(setup, "input", PARTS)
        create_topic(setup, "output", PARTS)
        produce(setup, "input", [(None, b"%d" % i, i % PARTS) for i in range(N)])
        reader = Reader(setup, "output")
        reader.start()
        security = {
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(tls.ca),
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "copier",
            "sasl.password": "copier-pw",
        }
        args = [f"--client-config={k}={v}" for k, v in security.items()]
        copiers = [
            subprocess.Popen(
                [
                    sys.executable,
                    COPIER,
                    "--bootstrap",
                    b.bootstrap_for("SASL_SSL"),
                    "--input",
                    "input",
                    "--output",
                    "output",
                    "--partition",
                    str(p),
                    "--group",
                    "copier-group",
                    *args,
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
            )
            for p in range(PARTS)
        ]
        try:
            for proc in copiers:
                out, _ = proc.communicate(timeout=240)
                assert proc.returncode == 0, out.decode()[-2000:]
            deadline = time.monotonic() + 30
            while reader.count() < N and time.monotonic() < deadline:
                time.sleep(0.2)
            time.sleep(1.0)  # any duplicate would arrive now
        finally:
            reader.stop_flag.set()
            reader.join(10)
            for proc in copiers:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        for p in range(PARTS):
            assert reader.values[p] == [b"%d" % i for i in range(p, N, PARTS)]
        assert "is Denied" not in b.log_path.read_text()
