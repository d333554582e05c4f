"""How to reach the API server: its address, its CA and the operator's credentials.

One value shared by everything that talks to the API: the kubernetes client adapter
(:mod:`.client`) builds it from the kubeconfig or the in-cluster service account, kopf logs in with
it, and the components that speak HTTP themselves (the ownership proxy, the preview gate) open
their TLS connections with :meth:`Connection.ssl_context`. It imports no client library.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Connection:
    """What a client needs to reach the API server."""

    server: str
    ca_data: bytes | None = None
    token: str | None = field(default=None, repr=False)
    insecure: bool = False
    cert_file: str | None = None
    key_file: str | None = None

    def ssl_context(self) -> ssl.SSLContext:
        """A client TLS context that trusts the cluster's CA (or nothing, when ``insecure``)."""
        context = ssl.create_default_context(cadata=self.ca_data.decode() if self.ca_data else None)
        if self.insecure:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if self.cert_file and self.key_file:
            context.load_cert_chain(self.cert_file, self.key_file)
        return context
