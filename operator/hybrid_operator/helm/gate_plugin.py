"""The helm post-renderer the operator gives helm: it shows the manifest to the operator, and passes it on unchanged.

Why this file exists: helm v4 takes post-renderers only as plugins, and a post-renderer is the one
place that sees the exact manifest helm is about to apply (hooks included) before anything is
applied. helm runs this file (``python -I -S gate_plugin.py <ticket>``, standard library only, so it
starts in milliseconds) with the rendered manifest on stdin. It sends the ticket and the manifest to
the operator's gate (:mod:`hybrid_operator.helm.gate`) over the Unix socket named by
:data:`SOCKET_ENV`, and waits for the verdict: admitted, it writes the very bytes it read to stdout
(the operator checked those, and helm applies them); refused, it exits 1 and helm stops before
applying anything. Any failure to reach the operator refuses too.
"""

from __future__ import annotations

import os
import socket
import sys

#: the environment variable holding the gate's socket path (set in helm's environment by the operator)
SOCKET_ENV = "HYBRID_OPERATOR_HELM_GATE"
#: seconds to wait for the operator's verdict (it may ask the API server which kinds are namespaced)
TIMEOUT = 120.0
ADMITTED = b"ok\n"


def main(argv: list[str]) -> int:
    if len(argv) != 2 or not os.environ.get(SOCKET_ENV):
        print(f"usage: {SOCKET_ENV}=<socket> gate_plugin.py <ticket> < manifest", file=sys.stderr)
        return 2
    manifest = sys.stdin.buffer.read()
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
            connection.settimeout(TIMEOUT)
            connection.connect(os.environ[SOCKET_ENV])
            connection.sendall(argv[1].encode() + b"\n" + manifest)
            connection.shutdown(socket.SHUT_WR)
            answer = b""
            while chunk := connection.recv(65536):
                answer += chunk
    except OSError as exc:
        print(f"cannot reach the operator's manifest gate: {exc}", file=sys.stderr)
        return 1
    if answer != ADMITTED:
        print(answer.decode(errors="replace").strip() or "refused", file=sys.stderr)
        return 1
    sys.stdout.buffer.write(manifest)
    sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
