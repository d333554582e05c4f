"""What every part of the node agent shares: the client, the work queue, and the caches it reads from."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hybrid_operator.localcluster import objects
from hybrid_operator.localcluster.nodeagent.client import ApiClient, ApiError
from hybrid_operator.localcluster.nodeagent.informer import Informer
from hybrid_operator.localcluster.nodeagent.workqueue import WorkQueue
from hybrid_operator.localcluster.simnode.node import NODE_NAME, node_labels

#: the API server's answers that mean "already done" or "nothing left to do" for a write
GONE = 404
CONFLICT = 409


@dataclass
class AgentContext:
    """The agent's client, queue and caches (pods everywhere, its Node, claims, volumes, classes)."""

    client: ApiClient
    queue: WorkQueue
    pods: Informer
    nodes: Informer
    claims: Informer
    volumes: Informer
    classes: Informer

    def node(self) -> dict[str, Any] | None:
        return self.nodes.get("", NODE_NAME)

    def node_labels(self) -> dict[str, Any]:
        """The Node's labels as stored (a user may have added some), else the ones it registers with."""
        node = self.node()
        return objects.labels(node) if node is not None else node_labels()


def pod_path(pod: dict[str, Any], subresource: str = "") -> str:
    path = f"/api/v1/namespaces/{objects.namespace(pod)}/pods/{objects.name(pod)}"
    return f"{path}/{subresource}" if subresource else path


async def tolerating(codes: tuple[int, ...], write: Any) -> dict[str, Any] | None:
    """Await ``write``; None when the server answers one of ``codes`` (the write is moot), else its answer."""
    try:
        answer: dict[str, Any] = await write
    except ApiError as refused:
        if refused.status in codes:
            return None
        raise
    return answer
