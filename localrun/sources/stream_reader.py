"""Reads a table's stream (every shard) and hands out each account's new records once, in order:
for tests and the benchmark, which deliver records to the stream path themselves."""

from __future__ import annotations

import threading
from collections import defaultdict
from typing import Any

from hybrid_counter.keys import account_pk


class StreamReader:
    """Reads the table's stream (all shards) and hands out each account's new records once."""

    def __init__(self, streams: Any, arn: str) -> None:
        self.arn = arn
        self._streams = streams
        self._iterators: dict[str, str | None] = {}
        self._by_account: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self._cursor: dict[str, int] = defaultdict(int)
        self._shard: dict[str, str] = {}
        self._lock = threading.Lock()
        self._polls = 0

    def _poll(self) -> None:
        # New shards appear when one closes (its iterator runs out); look for them then, and now
        # and again in any case, rather than on every poll.
        if self._polls % 100 == 0 or None in self._iterators.values():
            shards = self._streams.describe_stream(StreamArn=self.arn)["StreamDescription"]["Shards"]
            for shard in shards:
                shard_id = shard["ShardId"]
                if shard_id not in self._iterators:
                    self._iterators[shard_id] = self._streams.get_shard_iterator(
                        StreamArn=self.arn, ShardId=shard_id, ShardIteratorType="TRIM_HORIZON"
                    )["ShardIterator"]
        self._polls += 1
        for shard_id, start in list(self._iterators.items()):
            iterator = start
            while iterator:
                page = self._streams.get_records(ShardIterator=iterator, Limit=1000)
                iterator = page.get("NextShardIterator")
                for record in page["Records"]:
                    pk = record["dynamodb"]["Keys"]["pk"]["S"]
                    self._by_account[pk].append(record)
                    self._shard[record["dynamodb"]["SequenceNumber"]] = shard_id
                if len(page["Records"]) < 1000:
                    break
            self._iterators[shard_id] = iterator
        for shard_id in [s for s, it in self._iterators.items() if it is None]:
            del self._iterators[shard_id]  # closed and read to its end

    def records_for(self, account_id: str) -> list[dict[str, Any]]:
        return self.records_of(account_pk(account_id))

    def records_of(self, pk: str) -> list[dict[str, Any]]:
        """The records of one partition (an account's, an organization's) not read yet."""
        with self._lock:
            self._poll()
            records = self._by_account[pk][self._cursor[pk] :]
            self._cursor[pk] = len(self._by_account[pk])
            return records

    def shard_of(self, record: dict[str, Any]) -> str:
        return self._shard[record["dynamodb"]["SequenceNumber"]]
