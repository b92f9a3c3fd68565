"""An SQS producer with boto3, under `opentelemetry-instrument`: `produce.py KEY:BEHAVIOUR...`
sends one message per argument (a key given twice is sent twice: two message ids) and
prints "key message_id" per send."""

from __future__ import annotations

import json
import os
import sys

import boto3


def main() -> None:
    sqs = boto3.client("sqs", endpoint_url=os.environ["LAB_SQS_ENDPOINT"])
    for spec in sys.argv[1:]:
        key, behaviour = spec.split(":", 1)
        sent = sqs.send_message(
            QueueUrl=os.environ["LAB_QUEUE_URL"],
            MessageBody=json.dumps({"key": key, "behaviour": behaviour}),
        )
        print(key, sent["MessageId"], flush=True)


if __name__ == "__main__":
    main()
