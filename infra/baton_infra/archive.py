"""The archive's catalog: a Glue database and table over the payload bucket's ``archive/`` prefix,
so Athena can query archived instances without Baton (docs/archive.md).

Each object is one gzip JSON line (an instance with its steps, jobs and history) at
``archive/<yyyy>/<mm>/<dd>/<definition>/<id>.json.gz``. Partition projection computes the
partitions from the key layout (no crawler, no ``MSCK REPAIR``): year, month and day are ranges,
the definition is *injected*, so a query names the definition it reads
(``WHERE definition = 'orders'``) and Athena lists only that prefix.
"""

from __future__ import annotations

from aws_cdk import Aws
from aws_cdk import aws_glue as glue
from aws_cdk import aws_s3 as s3
from baton.engine.archive_store import PREFIX as ARCHIVE_KEY_PREFIX
from constructs import Construct

from baton_infra.config import DeployConfig

TABLE_NAME = "archived_instances"
FIRST_YEAR, LAST_YEAR = 2024, 2124
STEP = (
    "struct<id:string,stepid:string,type:string,status:string,attempt:int,jobtype:string,"
    "workerid:string,createdat:string,startedat:string,completedat:string,"
    "childinstanceid:string>"
)
EVENT = (
    "struct<seq:bigint,at:string,type:string,stepid:string,stepexecutionid:string,"
    "jobid:string,attempt:int,workerid:string,message:string>"
)
# The document's top-level fields (JSON keys match case-insensitively); instance, jobs and
# payloads are JSON text (read them with json_extract).
COLUMNS = (
    ("format", "string", "document format (baton.archive/1)"),
    ("id", "string", "instance id"),
    ("definitionname", "string", "definition name"),
    ("definitionversion", "int", "definition version (null for an inline definition)"),
    ("status", "string", "COMPLETED, FAILED, TIMED_OUT or CANCELLED"),
    ("correlationid", "string", "correlation id"),
    ("parentinstanceid", "string", "the parent of a sub-workflow"),
    ("createdat", "string", "ISO-8601 start"),
    ("completedat", "string", "ISO-8601 end"),
    ("archivedat", "string", "ISO-8601 time it was archived"),
    ("retentionseconds", "bigint", "the retention that applied"),
    ("instance", "string", "the instance as GET /v1/instances/{id} showed it (JSON)"),
    ("steps", f"array<{STEP}>", "its step executions"),
    ("history", f"array<{EVENT}>", "its history events"),
    ("jobs", "string", "its jobs as stored (JSON)"),
    ("payloads", "string", "original payload path -> archive key (JSON)"),
)


class ArchiveCatalog(Construct):
    """Glue database + table with partition projection over the archive prefix."""

    def __init__(
        self, scope: Construct, construct_id: str, *, config: DeployConfig, bucket: s3.IBucket
    ) -> None:
        super().__init__(scope, construct_id)
        self.database_name = f"baton_{config.stage.replace('-', '_')}"
        self.table_name = TABLE_NAME
        self.database = glue.CfnDatabase(
            self,
            "Database",
            catalog_id=Aws.ACCOUNT_ID,
            database_input=glue.CfnDatabase.DatabaseInputProperty(
                name=self.database_name,
                description=f"Baton {config.stage}: archived workflow instances (docs/archive.md)",
            ),
        )
        root = f"s3://{bucket.bucket_name}/{ARCHIVE_KEY_PREFIX}"
        self.table = glue.CfnTable(
            self,
            "Table",
            catalog_id=Aws.ACCOUNT_ID,
            database_name=self.database_name,
            table_input=glue.CfnTable.TableInputProperty(
                name=TABLE_NAME,
                description="One row per archived instance (gzip JSON, one line per object)",
                table_type="EXTERNAL_TABLE",
                parameters={
                    "EXTERNAL": "TRUE",
                    "classification": "json",
                    "compressionType": "gzip",
                    "projection.enabled": "true",
                    "projection.year.type": "integer",
                    "projection.year.range": f"{FIRST_YEAR},{LAST_YEAR}",
                    "projection.month.type": "integer",
                    "projection.month.range": "1,12",
                    "projection.month.digits": "2",
                    "projection.day.type": "integer",
                    "projection.day.range": "1,31",
                    "projection.day.digits": "2",
                    "projection.definition.type": "injected",
                    "storage.location.template": (
                        f"{root}${{year}}/${{month}}/${{day}}/${{definition}}/"
                    ),
                },
                partition_keys=[
                    glue.CfnTable.ColumnProperty(name=name, type="string", comment=comment)
                    for name, comment in (
                        ("year", "yyyy of the end (UTC)"),
                        ("month", "mm of the end"),
                        ("day", "dd of the end"),
                        ("definition", "definition name (injected: name it in WHERE)"),
                    )
                ],
                storage_descriptor=glue.CfnTable.StorageDescriptorProperty(
                    location=root,
                    input_format="org.apache.hadoop.mapred.TextInputFormat",
                    output_format="org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
                    compressed=True,
                    serde_info=glue.CfnTable.SerdeInfoProperty(
                        serialization_library="org.openx.data.jsonserde.JsonSerDe",
                        parameters={"case.insensitive": "TRUE"},
                    ),
                    columns=[
                        glue.CfnTable.ColumnProperty(name=n, type=t, comment=c)
                        for n, t, c in COLUMNS
                    ],
                ),
            ),
        )
        self.table.add_dependency(self.database)
