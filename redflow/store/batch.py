"""Commands and scripts sent together in one round trip (per master)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from redis.exceptions import AskError, ClusterDownError, ConnectionError, MovedError, NoScriptError, ResponseError, TryAgainError

from redflow.store.connection import is_cluster
from redflow.store.library import LibraryFunction, missing_function_as_noscript

_REDIRECTS = (MovedError, AskError, TryAgainError, ClusterDownError, ConnectionError)
#: Replies after which an item is sent again on its own: a moved slot, or a library Redis lost.
_SEND_AGAIN = (*_REDIRECTS, NoScriptError)


def _same(reply: Any) -> Any:
    return reply


def _alone(apply: Callable[[Any], Any], redis: Any) -> Any:
    """Send one item as a plain command; an error reply is kept as the reply,
    as a pipeline keeps it (a lost connection raises, as from a pipeline)."""
    try:
        return apply(redis)
    except ResponseError as exc:
        return exc


class Batch:
    """Commands and scripts sent together, replies in call order.

    On one Redis it is one pipeline. redis-py refuses scripts in Redis
    Cluster pipelines, so on a cluster it is one pipeline per master (each
    item goes to the master of its first key's slot); an item whose slot
    moved meanwhile (failover) is sent again through the cluster client.
    Use it like a pipeline: ``batch.hget(key, field)``, script wrappers with
    ``conn=batch``, then ``batch.execute()``: a script's reply comes back
    parsed by its wrapper, an error reply as the exception.
    """

    def __init__(self, redis: Any) -> None:
        self._redis = redis
        self._cluster = is_cluster(redis)
        # (routing key, apply(client), send again(client), parse(reply))
        self._items: list[tuple[Any, Callable[[Any], Any], Callable[[Any], Any], Callable[[Any], Any]]] = []

    def __len__(self) -> int:
        return len(self._items)

    def __getattr__(self, name: str) -> Callable[..., Batch]:
        def record(*args: Any, **kwargs: Any) -> Batch:
            def apply(client: Any) -> Any:
                return getattr(client, name)(*args, **kwargs)

            self._items.append((args[0], apply, apply, _same))
            return self

        return record

    def run_script(self, script: LibraryFunction, keys: Sequence[Any], args: Sequence[Any], parse: Callable[[Any], Any] = _same) -> Batch:
        """One function of redflow's library (FCALL); where Redis lost the
        library, the item is sent again through the function, which loads it."""
        self._items.append(
            (
                keys[0],
                lambda client: client.fcall(script.name, len(keys), *keys, *args),
                lambda client: script(keys=keys, args=args, client=client),
                parse,
            )
        )
        return self

    def execute(self, raise_on_error: bool = True) -> list[Any]:
        items, self._items = self._items, []
        if not items:
            return []
        if len(items) == 1 and not self._cluster:
            replies = [_alone(items[0][1], self._redis)]  # one item needs no pipeline (and its CPU)
        elif not self._cluster:
            pipe = self._redis.pipeline(transaction=False)
            for _, apply, _, _ in items:
                apply(pipe)
            replies = pipe.execute(raise_on_error=False)
        else:
            replies = self._execute_per_master(items)
        for index, reply in enumerate(replies):
            reply = replies[index] = missing_function_as_noscript(reply)
            if isinstance(reply, _SEND_AGAIN):
                if isinstance(reply, _REDIRECTS):
                    self._redis.nodes_manager.initialize()
                try:
                    replies[index] = items[index][2](self._redis)
                except Exception as exc:  # kept as a reply, like a pipeline's error
                    replies[index] = exc
        if raise_on_error:
            for reply in replies:
                if isinstance(reply, Exception):
                    raise reply
        return [reply if isinstance(reply, Exception) else parse(reply) for (_, _, _, parse), reply in zip(items, replies)]

    def _execute_per_master(self, items: list[Any]) -> list[Any]:
        cluster = self._redis
        groups: dict[str, tuple[Any, list[int]]] = {}
        for index, (key, _, _, _) in enumerate(items):
            node = cluster.nodes_manager.get_node_from_slot(cluster.keyslot(key))
            groups.setdefault(node.name, (node, []))[1].append(index)
        replies: list[Any] = [None] * len(items)
        for node, indexes in groups.values():
            pipe = node.redis_connection.pipeline(transaction=False)
            for index in indexes:
                items[index][1](pipe)
            try:
                node_replies = pipe.execute(raise_on_error=False)
            except ConnectionError as exc:  # the master is gone: its items go through the cluster client
                node_replies = [exc] * len(indexes)
            for index, reply in zip(indexes, node_replies):
                replies[index] = reply
        return replies
