"""An SQS consumer as a team writes it with boto3: receive, work, delete. It runs under
`opentelemetry-instrument` and knows nothing of dupescope. It asks SQS for each message's
ApproximateReceiveCount for its own sake (a redelivered slow or crashed job is quick the
second time); LAB_RECORD_RECEIVE_COUNT=1 adds the one line that records that count on the
message's span.

The lab's jobs: `normal` works 50 ms; `slow` outlives the queue's visibility timeout on
its first delivery; `crash` waits on its first delivery for the lab to kill its process
(after its side effect, before its delete). Each run writes the side-effect ledger
(tests/support/ledger.py) for the lab's truth.
"""

from __future__ import annotations

import json
import os
import socket
import time

import boto3
from opentelemetry import trace
from support import ledger

LEDGER = os.environ["LAB_LEDGER"]
WORKER = f"{socket.gethostname()}:{os.getpid()}"


def handle(sqs, queue_url: str, message: dict) -> None:  # type: ignore[no-untyped-def]
    job = json.loads(message["Body"])
    received = int(message["Attributes"]["ApproximateReceiveCount"])
    if os.environ.get("LAB_RECORD_RECEIVE_COUNT") == "1":
        # The one line that gives dupescope the delivery attempt (docs/queues-sidekiq-sqs.md).
        trace.get_current_span().set_attribute("aws.sqs.approximate_receive_count", received)
    run = ledger.new_run()
    ledger.write(LEDGER, "effect", job["key"], message["MessageId"], run, WORKER)
    if job["behaviour"] == "slow" and received == 1:
        time.sleep(float(os.environ["LAB_SLOW_SECONDS"]))
    if job["behaviour"] == "crash" and received == 1:
        time.sleep(600)  # killed here by the lab
    time.sleep(0.05)
    ledger.write(LEDGER, "done", job["key"], message["MessageId"], run, WORKER)
    try:
        sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
    except sqs.exceptions.ClientError:
        pass  # a receipt handle gone stale once the message was delivered again


def main() -> None:
    sqs = boto3.client("sqs", endpoint_url=os.environ["LAB_SQS_ENDPOINT"])
    queue_url = os.environ["LAB_QUEUE_URL"]
    try:
        while True:
            response = sqs.receive_message(
                QueueUrl=queue_url, MaxNumberOfMessages=1, WaitTimeSeconds=1,
                MessageSystemAttributeNames=["ApproximateReceiveCount"],
            )
            for message in response.get("Messages", []):
                handle(sqs, queue_url, message)
    except KeyboardInterrupt:
        pass  # stopped: the SDK exports what it holds on the way out


if __name__ == "__main__":
    main()
